"""Run `jev-harness` as a real subprocess against the loopback Jev server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jmp_lab.servers.jev import JevServer
from tests.support.cli import Run

_STRIPPED = ("JMP_", "JEV_", "FLASH_")
_KEPT = ("JMP_WARM", "JMP_WARM_DIR")  # the suite's own pool setting (conftest), never the user's

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPTS = Path(__file__).resolve().parent / "scripts"
JEV_KEY = "jev-harness-secret-key-0123456789"


class HarnessCli:
    """`python -m jev_harness.cli ...` with a sessions dir, a working dir and loopback Jev."""

    def __init__(self, tmp: Path, jev: JevServer) -> None:
        self.tmp, self.jev = tmp, jev
        self.home = tmp / "sessions"
        self.cwd = tmp / "work"
        self.cwd.mkdir(exist_ok=True)
        self.extra_env: dict[str, str] = {}

    def env(self, key: bool = True) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED) or k in _KEPT}
        env.pop("TYPESAFE_API_KEY", None)
        env.update(TYPESAFE_BASE_URL=self.jev.url, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = str(ROOT)
        if key:
            env["TYPESAFE_API_KEY"] = JEV_KEY
        env.update(self.extra_env)
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "jev_harness.cli", *args]

    def run_argv(self, script: str | Path, goal: str, inputs: Any, *extra: str) -> list[str]:
        return self.argv(
            "run",
            str(script),
            "--goal",
            goal,
            "--inputs",
            inputs if isinstance(inputs, str) else json.dumps(inputs),
            "--sessions-dir",
            str(self.home),
            "--json",
            *extra,
        )

    def call(
        self, argv: list[str], key: bool = True, timeout: float = 90, envelope: bool = True
    ) -> Run:
        """`envelope`: stdout is a `--json` stream of `run` (tests/support/cli.py json_lines)."""
        done = subprocess.run(
            argv,
            cwd=self.cwd,
            env=self.env(key),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run.parsed(done.returncode, done.stdout, done.stderr, envelope)

    def run(self, script: str | Path, goal: str, inputs: Any, *extra: str, key: bool = True) -> Run:
        return self.call(self.run_argv(script, goal, inputs, *extra), key=key)

    def inspect(self, session_id: str) -> Run:
        argv = self.argv("inspect", session_id, "--sessions-dir", str(self.home), "--json")
        return self.call(argv, envelope=False)  # HARNESS.md 6: its own answer, no envelope

    def events(self, session_id: str) -> list[dict[str, Any]]:
        path = self.home / session_id / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]
