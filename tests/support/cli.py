"""The one CLI harness: the real `python main.py --json ...` as a subprocess, against the
loopback model servers (jmp_lab/servers/), with its own sessions dir and workspace, and the one way
to read what a run printed (`Run`) and what it wrote (`Cli.log`).

Every stdout line of a `--json` run must be one JSON object (the contract); `json_lines` fails
the test otherwise. Keys are distinctive values: any trace of them in an output is a leak.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer

_STRIPPED = ("JMP_", "JEV_", "FLASH_")
_KEPT = ("JMP_WARM", "JMP_WARM_DIR")  # the suite's own pool setting (conftest), never the user's

ROOT = Path(__file__).resolve().parents[2]
JEV_KEY = "tsk-BLACKBOX-7f3a9c1e5b2d4680aa11"
FLASH_KEY = "sk-bbflash-Q9w8E7r6T5y4U3i2o1p0"
DEEPSEEK_KEY = "sk-bbdeepseek-Z1x2C3v4B5n6M7k8"


_SCHEMA: dict[str, Any] = {}  # validators of `jmp --json-schema`: the whole, and per kind


def check_line(line: Any) -> None:
    """One `--json` line validates against the published schema (`jmp --json-schema`,
    protocol/json_schema.py): every line a test reads from a `--json` stdout passes here. A
    line of a known kind is checked against that kind's definition (what `oneOf` picks: the
    kinds differ by `kind`), so that a failure names the field."""
    if not _SCHEMA:
        from jsonschema import Draft202012Validator

        from protocol.json_schema import schema

        whole = schema()
        Draft202012Validator.check_schema(whole)
        _SCHEMA["*"] = Draft202012Validator(whole)
        for name in whole["$defs"]:
            if name.startswith("line."):
                own = {"$ref": f"#/$defs/{name}", "$defs": whole["$defs"]}
                _SCHEMA[name] = Draft202012Validator(own)
    kind = line.get("kind", line.get("type")) if isinstance(line, dict) else None
    validator = _SCHEMA.get(f"line.{kind}", _SCHEMA["*"])
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(line)]
    assert not problems, (
        f"a --json line breaks `jmp --json-schema`: {problems[:5]} in {line!r:.600}"
    )


def json_lines(stdout: str, envelope: bool = True) -> list[dict[str, Any]]:
    """Every stdout line is one JSON object (the --json contract); raises otherwise. With
    `envelope` (every `--json` stream but jev-harness's `inspect`/`check-task` answers), each
    line also validates against `jmp --json-schema`."""
    return [json_line(line, envelope) for line in stdout.splitlines()]


def json_line(raw: str | bytes, envelope: bool = True) -> dict[str, Any]:
    """One `--json` line, as `json_lines` reads each: for a stream read line by line while the
    run goes on (a test that reacts to a line before the run ends)."""
    line = json.loads(raw)
    assert isinstance(line, dict), f"a --json line is not an object: {raw[-2000:]!r}"
    if envelope:
        check_line(line)
    return line


@dataclass
class Run:
    """One CLI invocation: exit status, raw streams, parsed stdout lines."""

    code: int
    stdout: str
    stderr: str
    lines: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def parsed(cls, code: int, stdout: str, stderr: str, envelope: bool = True) -> Run:
        """A finished --json run, its stdout parsed strictly (see `json_lines`)."""
        return cls(code, stdout, stderr, json_lines(stdout, envelope))

    @property
    def result(self) -> dict[str, Any]:
        """The last line's data; that line must be the `result` line."""
        assert self.lines and self.lines[-1]["kind"] == "result", self.stdout[-2000:] + self.stderr
        return dict(self.lines[-1]["data"])

    def kinds(self) -> list[str]:
        return [line["kind"] for line in self.lines]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line["data"] for line in self.lines if line["kind"] == kind]


class Cli:
    """`python main.py --json ...` with its own sessions dir, workspace and loopback models.

    `extra_env` is added to every run's environment (after the defaults)."""

    def __init__(self, tmp: Path, jev: JevServer, flash: FlashServer) -> None:
        self.tmp, self.jev, self.flash = tmp, jev, flash
        self.home = tmp / "sessions"
        self.workspace = tmp / "ws"
        self.workspace.mkdir(exist_ok=True)
        (tmp / "mcp.json").write_text('{"mcpServers": {}}')
        self.config_home = tmp / "config"  # $XDG_CONFIG_HOME: jmp/keys.json (jmp --setup)
        self.extra_env: dict[str, str] = {}

    def env(self, **changes: str | None) -> dict[str, str]:
        """The run environment (the user's JMP_/JEV_/FLASH_ settings and keys removed); a change
        to None removes the variable."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED) or k in _KEPT}
        env.pop("DEEPSEEK_API_KEY", None)
        env.update(
            TYPESAFE_API_KEY=JEV_KEY,
            TYPESAFE_BASE_URL=self.jev.url,
            FLASH_API_KEY=FLASH_KEY,
            FLASH_BASE_URL=self.flash.url,
            JMP_SESSIONS_DIR=str(self.home),
            JMP_MCP_CONFIG=str(self.tmp / "mcp.json"),
            XDG_CONFIG_HOME=str(self.config_home),  # the key file: this test's, never the user's
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        for key, value in changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def argv(self, *args: str, json_flag: bool = True) -> list[str]:
        return [sys.executable, str(ROOT / "main.py"), *(["--json"] if json_flag else []), *args]

    def run(self, *args: str, json_flag: bool = True, **kw: Any) -> Run:
        """One finished run of `main.py [--json] ARGS` (see `exec` for the keywords)."""
        return self.exec(self.argv(*args, json_flag=json_flag), json_flag=json_flag, **kw)

    def task(self, prompt: str, *args: str, **kw: Any) -> Run:
        """A new run in this workspace: `--workspace WS ARGS PROMPT`."""
        return self.run("--workspace", str(self.workspace), *args, prompt, **kw)

    def exec(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        json_flag: bool = True,
        cwd: Path | None = None,
        timeout: float = 100,
    ) -> Run:
        """Run any argv (e.g. under a wrapper) in the workspace; stdin is empty."""
        proc = subprocess.run(
            argv,
            cwd=cwd or self.workspace,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if json_flag:
            return Run.parsed(proc.returncode, proc.stdout, proc.stderr)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """A running `main.py --json ARGS`, the leader of a process group of its own (as a
        terminal's foreground job is), stdout and stderr piped."""
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

    def requests_seen(self) -> int:
        return len(self.jev.requests) + len(self.flash.requests)

    def log_path(self, sid: str, home: Path | None = None) -> Path:
        return (home or self.home) / sid / "events.jsonl"

    def log(self, sid: str, home: Path | None = None) -> list[dict[str, Any]]:
        """Every record of a session's event log, parsed."""
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


def wait_for_line(proc: subprocess.Popen[str], predicate: Any, timeout: float = 60) -> list[dict]:
    """Read JSON lines from a running CLI until one matches; returns all lines read. The
    deadline only bounds a hang: the line either comes or the test fails."""
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(json_line(line))
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


def short_dir() -> Path:
    """A temp dir with a short path (ipc:// paths are capped near 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="jbb", dir="/tmp"))


def tool_call(**arguments: Any) -> dict[str, Any]:
    """A scripted generator answer that calls the routed tool with these arguments."""
    return {"tool_call": {"arguments": arguments}}


def session_bytes(directory: Path) -> bytes:
    """Every byte stored under a session directory (log, artifacts, checkpoints, sqlite)."""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def inside(directory: Path, relative: str) -> bool:
    """The path resolves inside the session directory and exists."""
    path = (directory / relative).resolve()
    return path.is_relative_to(directory.resolve()) and path.exists()
