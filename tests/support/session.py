"""Helpers for session-store tests: writer processes and log inspection."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_writer(
    home: Path, session_id: str, count: int, durable: bool = False
) -> subprocess.Popen[str]:
    """A tests.fakes.writer process on that session (see its docstring)."""
    env = {"PATH": "/usr/bin:/bin", "WRITER_DURABLE": "1" if durable else "0"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.writer", str(home), session_id, str(count)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line(proc: subprocess.Popen[str], timeout_s: float = 10.0) -> str:
    """The writer's next stdout line (blocking read; the test timeout bounds a hang)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    line = proc.stdout.readline()
    assert time.monotonic() < deadline, "writer too slow"
    return line.strip()


def log_lines(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "events.jsonl").read_bytes().splitlines()]


@contextlib.contextmanager
def writer(
    home: Path, session_id: str, count: int, durable: bool = False
) -> Iterator[subprocess.Popen[str]]:
    """start_writer, killed and reaped with its pipes closed on the way out."""
    proc = start_writer(home, session_id, count, durable)
    try:
        yield proc
    finally:
        proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        proc.wait()
