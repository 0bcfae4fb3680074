"""`jmp-demo` (`make demo`, `python -m jmp_lab.demo`): jmp end to end, with no model keys.

Jev and Flash are loopback servers speaking their real wire protocols, answering from a SCRIPT;
the tools, files, processes, the kill -9 and the recovery are real. What is shown is jmp's own
readable view, exactly as a person gets it; every `$` line is a command you can copy (the
`export` line first, while the demo's servers run; `--list` and the replay need no model and
work afterwards too). Its workspace and sessions are kept in one directory (`--dir`, default a
new temporary one) for you to look at.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jmp_lab import loopback
from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from kernel.config.install import program

ROOT = Path(__file__).resolve().parents[1]  # the directory that holds main.py
KEY = "demo-not-a-real-key"
GREET = "def greet(name):\n    return 'hello ' + name\n\nprint(greet('jmp'))\n"
SLOW = "echo started >> log.txt; sleep 30"


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


class Demo:
    def __init__(self, base: Path, jev: JevServer, flash: FlashServer) -> None:
        self.jev, self.flash = jev, flash
        self.workspace = base / "workspace"
        self.sessions = base / "sessions"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.models = {
            "TYPESAFE_BASE_URL": jev.url,
            "TYPESAFE_API_KEY": KEY,
            "FLASH_BASE_URL": flash.url,
            "FLASH_API_KEY": KEY,
        }
        # The person's own sessions, MCP servers and model settings stay out of the demo.
        drop = ("JMP_SESSIONS_DIR", "JMP_MCP_CONFIG", "JEV_", "FLASH_", "DEEPSEEK_API_KEY")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        self.env |= self.models

    def words(self, *args: str) -> list[str]:
        """`jmp ARGS` as typed: the demo's sessions dir, and no MCP servers of yours."""
        own = [] if "--list" in args else ["--no-mcp"]
        return ["jmp", "--sessions-dir", str(self.sessions), *own, *args]

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """Run `jmp ARGS` in the workspace, its view straight onto this terminal."""
        print(f"$ {shlex.join(self.words(*args))}", flush=True)
        argv = [sys.executable, str(ROOT / "main.py"), *self.words(*args)[1:]]
        return subprocess.Popen(argv, cwd=self.workspace, env=self.env, start_new_session=True)

    def run(self, *args: str) -> int:
        return self.start(*args).wait()

    def newest_session(self) -> str:
        from kernel.store.catalog import list_sessions

        return list_sessions(self.sessions)[0].session_id

    def kill_during_the_slow_command(self, *args: str) -> str:
        """Start a run and kill -9 its whole process group once the slow command has begun."""
        proc = self.start(*args)
        log = self.workspace / "log.txt"
        while not log.exists() and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(1.0)  # well inside the 30-second command
        print("\n!! kill -9 of the whole jmp process group, mid-command", flush=True)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return self.newest_session()


def script_first_task(jev: JevServer, flash: FlashServer) -> None:
    jev.script(
        [{"route": c} for c in ("write", "bash", "edit", "bash", "done")]
        + [{"completion_review": "complete"}]
    )
    edit = {"command": "str_replace", "path": "greet.py", "old_str": "'hello '"}
    flash.queue(
        [
            {"tool_call": {"arguments": {"path": "greet.py", "file_text": GREET}}},
            {"tool_call": {"arguments": {"command": "python3 greet.py"}}},
            {"tool_call": {"arguments": {**edit, "new_str": "'Hello, '"}}},
            {"tool_call": {"arguments": {"command": "python3 greet.py"}}},
            {"text": "greet.py now prints 'Hello, jmp' (checked by running it)."},
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program("jmp-demo", "jmp_lab.demo"), description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dir", metavar="DIR", help="where the demo's files go (kept)")
    parser.add_argument(
        "--serve",
        action="store_true",
        help="instead: run the loopback models for a task of your own until Ctrl+C (no keys)",
    )
    parser.add_argument(
        "--answers", metavar="FILE", type=Path, help="--serve: scripted answers (made if missing)"
    )
    parser.add_argument("--jev-port", type=int, default=loopback.JEV_PORT, help="--serve")
    parser.add_argument("--flash-port", type=int, default=loopback.FLASH_PORT, help="--serve")
    args = parser.parse_args(argv)
    if args.serve:
        return loopback.serve(args.answers, args.jev_port, args.flash_port)
    base = Path(args.dir or tempfile.mkdtemp(prefix="jmp-demo-")).resolve()
    with JevServer() as jev, FlashServer() as flash:
        demo = Demo(base, jev, flash)
        print("jmp demo: the model decisions are SCRIPTED (loopback Jev and Flash servers);")
        print("the tools, files, processes, the kill and the recovery are real.")
        print("To type these commands yourself while it runs, first:")
        print(f"$ export {' '.join(f'{k}={shlex.quote(v)}' for k, v in demo.models.items())}")
        print(f"$ cd {shlex.quote(str(demo.workspace))}", flush=True)

        say("1. A multi-step task")
        script_first_task(jev, flash)
        demo.run("write greet.py and run it")

        say("2. A second run, killed with kill -9 during a slow command")
        jev.script([{"route": "bash"}])
        flash.queue([{"tool_call": {"arguments": {"command": SLOW}}}])
        session = demo.kill_during_the_slow_command("run the slow job")

        say("3. Reopening: the interrupted call's outcome is unknown, so the run is blocked")
        demo.run("--session", session)

        say("4. --ack-interrupted: acknowledged (not re-run), then the run goes on")
        jev.script([{"route": "done"}, {"completion_review": "complete"}])
        flash.queue([{"text": "The slow job was interrupted; log.txt shows it started once."}])
        code = demo.run("--session", session, "--ack-interrupted")

    log = demo.workspace / "log.txt"
    lines = log.read_text().splitlines() if log.exists() else []
    say("5. Afterwards (no model needed)")
    print(f"log.txt has {len(lines)} line(s): nothing ran twice")
    listed = demo.run("--list")
    print(f"$ {shlex.join(demo.words('--session', session))}    # replays the saved answer")
    print(f"\nEverything is in {base} (remove it when you are done).")
    return 0 if code == 0 and listed == 0 and len(lines) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
