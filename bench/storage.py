"""Storage: log appends per second (with and without fsync) and `jmp --list` start-up time."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel.store.session import Session
from protocol.codec import encode_event, make_event
from protocol.events import FinalData, RouteData, ToolFinishedData, ToolStartedData, UserData

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = 1000
RUNS = 9


def tool_started(n: int) -> ToolStartedData:
    """A tool_started record of the usual size (about 400 bytes as a line)."""
    return ToolStartedData(
        call_id=f"call-{n:06d}",
        tool="bash",
        target="pytest -q tests/test_ops.py -k divide --maxfail=1",
        request=f"artifacts/call-{n:06d}-request.json",
        arguments='{"command": "pytest -q tests/test_ops.py -k divide --maxfail=1", '
        '"is_input": false, "timeout": 120.0}',
    )


def appends_per_second(home: Path, durable: bool, count: int) -> float:
    """Appends until all are fsynced and announced: each fsynced alone when durable, else
    grouped by the session's commit (as a step's records are)."""
    with Session.create(home, ROOT) as session:
        start = time.perf_counter()
        for n in range(count):
            session.append(tool_started(n), durable=durable)
        session.sync()
        return count / (time.perf_counter() - start)


def populate(home: Path, sessions: int) -> None:
    """Write realistic finished sessions (about 30 records each) straight to disk."""
    for i in range(sessions):
        sid = f"{i:032x}"
        records = [UserData(text=f"task number {i}: make the failing test pass, then tidy up")]
        for n in range(6):
            records += [
                RouteData(choice="bash", confidence=0.9, context_bytes=4000, probabilities={}),
                tool_started(n),
                ToolFinishedData(
                    call_id=f"call-{n:06d}",
                    tool="bash",
                    status="ok",
                    exit_code=0,
                    text="collected 12 items\n" + "." * 200,
                    seconds=0.5,
                ),
            ]
        records.append(FinalData(status="completed", summary="done " * 40))
        (home / sid).mkdir(parents=True)
        lines = [_session_line(sid)]
        lines += [
            encode_event(make_event(sid, n + 2, 1.7e9 + i + n, d)) for n, d in enumerate(records)
        ]
        (home / sid / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def _session_line(sid: str) -> bytes:
    from protocol.events import SessionData

    return encode_event(make_event(sid, 1, 1.7e9, SessionData(session_id=sid, workspace=str(ROOT))))


def median_seconds(*commands: list[str]) -> list[float]:
    """Median wall time of each command; runs are interleaved so load hits all alike."""
    samples: list[list[float]] = [[] for _ in commands]
    for _ in range(RUNS):
        for argv, times in zip(commands, samples, strict=True):
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
            times.append(time.perf_counter() - start)
    return [statistics.median(times) for times in samples]


def run() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="jb"))
    try:
        plain = appends_per_second(tmp / "a", durable=False, count=5000)
        synced = appends_per_second(tmp / "b", durable=True, count=300)
        populate(tmp / "many", SESSIONS)
        jmp = [sys.executable, str(ROOT / "main.py"), "--list", "--json", "--sessions-dir"]
        bare, empty, listing = median_seconds(
            [sys.executable, "-c", "pass"], [*jmp, str(tmp / "none")], [*jmp, str(tmp / "many")]
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [
        ("appends/s, tool_started, fsynced in groups (the commit)", f"{plain:,.0f}", ""),
        ("appends/s, tool_started, fsync each", f"{synced:,.0f}", ""),
        ("python -c pass", f"{bare * 1000:.0f} ms", "1.0x"),
        ("jmp --list --json, no sessions", f"{empty * 1000:.0f} ms", f"{empty / bare:.1f}x"),
        (
            f"jmp --list --json, {SESSIONS} sessions",
            f"{listing * 1000:.0f} ms",
            f"{listing / bare:.1f}x",
        ),
    ]
    table = ["| measure | value | vs bare interpreter |", "|---|---|---|"]
    table += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    table.append(f"\nmedian of {RUNS} runs each; goal: --list within 3x of `python -c pass`.")
    return "\n".join(table)
