"""`make demo`: jmp end to end with no keys, against the bundled loopback model servers.

The model decisions are SCRIPTED (the servers speak the real wire protocols but answer from a
script); the tools, files, processes, crash and recovery are all real.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer

ROOT = Path(__file__).resolve().parents[1]


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def show(line: dict[str, Any]) -> None:
    """One event, briefly."""
    kind, data = line["kind"], line.get("data", {})
    if kind == "model_progress":
        return
    detail = {
        "route": lambda d: f"{d['choice']} (confidence {d['confidence']:.2f})",
        "tool_started": lambda d: f"{d['tool']} {d['target']}",
        "tool_finished": lambda d: f"{d['tool']} {d['status']} exit={d['exit_code']}",
        "tool_uncertain": lambda d: f"{d['tool']} cause={d['cause']} ack={d['acknowledged']}",
        "final": lambda d: f"{d['status']}: {d['summary']}",
        "result": lambda d: f"{d['status']}",
        "error": lambda d: f"{d['stage']} {d['error_class']}: {d['message']}",
    }.get(kind, lambda d: "")(data)
    print(f"  [{line.get('seq') or '-':>3}] {kind:<16} {detail}", flush=True)


class Demo:
    def __init__(self, tmp: Path, jev: JevServer, flash: FlashServer) -> None:
        self.workspace = tmp / "workspace"
        self.workspace.mkdir()
        (tmp / "mcp.json").write_text('{"mcpServers": {}}')
        self.env = dict(
            os.environ,
            TYPESAFE_API_KEY="demo-not-a-real-key",
            TYPESAFE_BASE_URL=jev.url,
            FLASH_API_KEY="demo-not-a-real-key",
            FLASH_BASE_URL=flash.url,
            JMP_SESSIONS_DIR=str(tmp / "sessions"),
            JMP_MCP_CONFIG=str(tmp / "mcp.json"),
        )

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / "main.py"), "--json", *args]

    def run(self, *args: str) -> dict[str, Any]:
        print("  $ jmp " + " ".join(args), flush=True)
        proc = subprocess.Popen(
            self.argv(*args), cwd=self.workspace, env=self.env, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        last: dict[str, Any] = {}
        for raw in proc.stdout:
            last = json.loads(raw)
            show(last)
        proc.wait()
        return dict(last.get("data", {}))

    def run_and_kill(self, *args: str, when: str) -> str:
        print("  $ jmp " + " ".join(args), flush=True)
        proc = subprocess.Popen(
            self.argv(*args),
            cwd=self.workspace,
            env=self.env,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        session = ""
        for raw in proc.stdout:
            line = json.loads(raw)
            show(line)
            session = line.get("session_id") or session
            if line["kind"] == "tool_started" and when in line["data"]["target"]:
                time.sleep(0.5)
                print("  !! kill -9 of the whole jmp process group, mid-command", flush=True)
                os.killpg(proc.pid, signal.SIGKILL)
                break
        proc.wait()
        return session


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="jmp-demo-"))
    try:
        with JevServer() as jev, FlashServer() as flash:
            demo = Demo(tmp, jev, flash)
            say("1. A multi-step task (SCRIPTED model decisions, real tools)")
            jev.script(
                [{"route": c} for c in ("write", "bash", "edit", "bash", "done")]
                + [{"completion_review": "complete"}]
            )
            code = "def greet(name):\n    return 'hello ' + name\n\nprint(greet('jmp'))\n"
            flash.queue(
                [
                    {"tool_call": {"arguments": {"path": "greet.py", "file_text": code}}},
                    {"tool_call": {"arguments": {"command": "python3 greet.py"}}},
                    {
                        "tool_call": {
                            "arguments": {
                                "command": "str_replace",
                                "path": "greet.py",
                                "old_str": "'hello '",
                                "new_str": "'Hello, '",
                            }
                        }
                    },
                    {"tool_call": {"arguments": {"command": "python3 greet.py"}}},
                    {"text": "greet.py now prints 'Hello, jmp' (checked by running it)."},
                ]
            )
            result = demo.run("--workspace", str(demo.workspace), "write greet.py and run it")
            print(f"  workspace now holds: {sorted(p.name for p in demo.workspace.iterdir())}")

            say("2. A second run killed with kill -9 during a slow command")
            jev.script([{"route": "bash"}])
            flash.queue(
                [{"tool_call": {"arguments": {"command": "echo started >> log.txt; sleep 30"}}}]
            )
            session = demo.run_and_kill(
                "--workspace", str(demo.workspace), "run the slow job", when="sleep 30"
            )

            say("3. Reopening: the interrupted call is uncertain, the run is blocked")
            result = demo.run("--session", session)

            say("4. --ack-interrupted: acknowledged (not re-run), then the run continues")
            jev.script([{"route": "done"}, {"completion_review": "complete"}])
            flash.queue([{"text": "The slow job was interrupted; log.txt shows it started once."}])
            result = demo.run("--session", session, "--ack-interrupted")
            log = demo.workspace / "log.txt"
            lines = log.read_text().splitlines() if log.exists() else []
            print(f"  log.txt has {len(lines)} line(s): nothing ran twice")
            return 0 if result.get("status") == "completed" and len(lines) == 1 else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
