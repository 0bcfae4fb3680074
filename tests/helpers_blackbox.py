"""Black-box harness for CONTRACT.md: the CLI as a subprocess, loopback models, files on disk."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.servers.flash import FlashServer
from tests.servers.jev import JevServer

_STRIPPED = ("JMP_", "JEV_", "FLASH_")
_KEPT = ("JMP_WARM", "JMP_WARM_DIR")  # the suite's own pool setting (conftest), never the user's

ROOT = Path(__file__).resolve().parent.parent
HEX32 = re.compile(r"^[0-9a-f]{32}$")
# Distinctive key values: any trace of them in an output is a leak.
JEV_SECRET = "tsk-BLACKBOX-7f3a9c1e5b2d4680aa11"
FLASH_SECRET = "sk-bbflash-Q9w8E7r6T5y4U3i2o1p0"
DEEPSEEK_SECRET = "sk-bbdeepseek-Z1x2C3v4B5n6M7k8"
TOOLS = {"read", "write", "edit", "bash", "recall", "ask", "done"}
STAGES = {"route", "completion_review", "generate", "respond", "tool", "compaction", "recall"}
# CONTRACT.md section 5, with the names jmp gives the contract's prose fields (docs/EVENTS.md).
REQUIRED = {
    "session": {"workspace", "session_id"},
    "user": {"text"},
    "run_started": {"model", "thinking", "listing"},
    "route": {"choice", "confidence", "context_bytes", "probabilities"},
    "model_started": {"stage", "model"},
    "model_progress": {"stage", "characters"},
    "usage": {"provider", "stage", "model", "seconds", "usage"},
    "argument_offload": {
        "backend",
        "tool",
        "policy",
        "generation_call_skipped",
        "generator",
        "flash_call_skipped",
    },
    "tool_started": {"call_id", "tool", "target", "request"},
    "tool_finished": {
        "call_id",
        "tool",
        "status",
        "exit_code",
        "text",
        "arguments",
        "artifact",
        "full_output",
    },
    "tool_uncertain": {"call_id", "tool", "cause", "acknowledged", "note"},
    "compaction": {"audience", "through", "checkpoint", "method"},
    "final": {"status", "summary"},
    "error": {"stage", "error_class", "message"},
    "cleanup_warning": {"error_class"},
}


@dataclass
class Run:
    """One CLI invocation: exit status, raw streams, parsed stdout lines."""

    code: int
    stdout: str
    stderr: str
    lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        return dict(self.lines[-1]["data"])

    def kinds(self) -> list[str]:
        return [line["kind"] for line in self.lines]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line["data"] for line in self.lines if line["kind"] == kind]


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line is one JSON object (the --json contract); raises otherwise."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert all(isinstance(line, dict) for line in lines), stdout[-2000:]
    return lines


class Cli:
    """`python main.py --json ...` with its own sessions dir, workspace and loopback models."""

    def __init__(self, tmp: Path, jev: JevServer, flash: FlashServer) -> None:
        self.tmp, self.jev, self.flash = tmp, jev, flash
        self.home = tmp / "sessions"
        self.workspace = tmp / "ws"
        self.workspace.mkdir(exist_ok=True)
        (tmp / "mcp.json").write_text('{"mcpServers": {}}')
        self.extra: dict[str, str] = {}

    def env(self, **changes: str | None) -> dict[str, str]:
        """The run environment; a change to None removes the variable."""
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED) or k in _KEPT}
        env.pop("DEEPSEEK_API_KEY", None)
        env.pop("TYPESAFE_API_KEY", None)
        env.update(
            TYPESAFE_API_KEY=JEV_SECRET,
            TYPESAFE_BASE_URL=self.jev.url,
            FLASH_API_KEY=FLASH_SECRET,
            FLASH_BASE_URL=self.flash.url,
            JMP_SESSIONS_DIR=str(self.home),
            JMP_MCP_CONFIG=str(self.tmp / "mcp.json"),
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra)
        for key, value in changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def run(
        self, *args: str, env: dict[str, str] | None = None, json_flag: bool = True, **kw: Any
    ) -> Run:
        argv = [sys.executable, str(ROOT / "main.py"), *(["--json"] if json_flag else []), *args]
        return self.exec(argv, env=env, json_flag=json_flag, **kw)

    def exec(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        json_flag: bool = True,
        cwd: Path | None = None,
        timeout: float = 100,
    ) -> Run:
        proc = subprocess.run(
            argv,
            cwd=cwd or self.workspace,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        lines = json_lines(proc.stdout) if json_flag else []
        return Run(proc.returncode, proc.stdout, proc.stderr, lines)

    def requests_seen(self) -> int:
        return len(self.jev.requests) + len(self.flash.requests)

    def log_path(self, sid: str, home: Path | None = None) -> Path:
        return (home or self.home) / sid / "events.jsonl"

    def log(self, sid: str, home: Path | None = None) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.log_path(sid, home).read_text().splitlines()]

    def clone(self, tag: str) -> Path:
        """A copy of the whole sessions dir, to damage without touching the original."""
        home = self.tmp / f"clone-{tag}"
        shutil.copytree(self.home, home, ignore=shutil.ignore_patterns("lock"))
        return home

    def append(self, sid: str, home: Path, kind: str, data: dict[str, Any], **extra: Any) -> None:
        """Append one well-formed record with the next seq, as a crashed writer would have."""
        last = self.log(sid, home)[-1]
        record = {
            "version": 1,
            "session_id": sid,
            "seq": last["seq"] + 1,
            "time": time.time(),
            "kind": kind,
            "data": data,
            **extra,
        }
        with self.log_path(sid, home).open("a") as f:
            f.write(json.dumps(record) + "\n")


def short_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="jbb", dir="/tmp"))


def tool_call(**arguments: Any) -> dict[str, Any]:
    return {"tool_call": {"arguments": arguments}}


def session_bytes(directory: Path) -> bytes:
    """Every byte stored under a session directory (log, artifacts, checkpoints, sqlite)."""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def inside(directory: Path, relative: str) -> bool:
    """The path resolves inside the session directory and exists."""
    path = (directory / relative).resolve()
    return path.is_relative_to(directory.resolve()) and path.exists()
