"""End-to-end harness: the real CLI as a subprocess against the loopback model servers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.servers.flash import FlashServer
from tests.servers.jev import JevServer

_STRIPPED = ("JMP_", "JEV_", "FLASH_")
_KEPT = ("JMP_WARM", "JMP_WARM_DIR")  # the suite's own pool setting (conftest), never the user's

ROOT = Path(__file__).resolve().parent.parent
JEV_KEY = "jev-secret-key-0123456789"
FLASH_KEY = "sk-flash-secret-0123456789abcdef"


@dataclass
class Outcome:
    """What one CLI run printed and returned."""

    code: int
    lines: list[dict[str, Any]]
    stderr: str
    stdout: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        assert self.lines and self.lines[-1]["kind"] == "result", self.stdout[-2000:] + self.stderr
        return dict(self.lines[-1]["data"])

    def kinds(self) -> list[str]:
        return [line["kind"] for line in self.lines]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line["data"] for line in self.lines if line["kind"] == kind]


def parse_lines(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line must be a JSON object (the --json contract)."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


class Jmp:
    """Runs `python main.py --json ...` with a sessions dir, a workspace and loopback models."""

    def __init__(self, tmp: Path, jev: JevServer, flash: FlashServer) -> None:
        self.tmp = tmp
        self.home = tmp / "sessions"
        self.workspace = tmp / "ws"
        self.workspace.mkdir(exist_ok=True)
        (tmp / "mcp.json").write_text('{"mcpServers": {}}')
        self.jev = jev
        self.flash = flash
        self.extra_env: dict[str, str] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED) or k in _KEPT}
        env.update(
            TYPESAFE_API_KEY=JEV_KEY,
            TYPESAFE_BASE_URL=self.jev.url,
            FLASH_API_KEY=FLASH_KEY,
            FLASH_BASE_URL=self.flash.url,
            JMP_SESSIONS_DIR=str(self.home),
            JMP_MCP_CONFIG=str(self.tmp / "mcp.json"),
            PYTHONUNBUFFERED="1",
        )
        env.pop("DEEPSEEK_API_KEY", None)
        env.update(self.extra_env)
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / "main.py"), "--json", *args]

    def run(self, *args: str, timeout: float = 90, env: dict[str, str] | None = None) -> Outcome:
        proc = subprocess.run(
            self.argv(*args),
            cwd=self.workspace,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return Outcome(proc.returncode, parse_lines(proc.stdout), proc.stderr, proc.stdout)

    def task(self, prompt: str, *args: str, **kw: Any) -> Outcome:
        return self.run("--workspace", str(self.workspace), *args, prompt, **kw)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.workspace,
            env=env or self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def log(self, session_id: str) -> list[dict[str, Any]]:
        path = self.home / session_id / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


def wait_for_line(proc: subprocess.Popen[str], predicate: Any, timeout: float = 60) -> list[dict]:
    """Read JSON lines from a running CLI until one matches; returns all lines read."""
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(json.loads(line))
        if predicate(seen[-1]):
            return seen
    raise AssertionError(f"no matching line; saw kinds {[s['kind'] for s in seen]}")


def kill_group(proc: subprocess.Popen[str]) -> None:
    """kill -9 the CLI's whole process group (workers live in groups of their own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    finish(proc)


def finish(proc: subprocess.Popen[str], timeout: float = 30) -> int:
    """Wait for a started CLI and close its pipes; returns the exit status."""
    proc.communicate(timeout=timeout)
    return proc.returncode
