"""Session open time at 1k, 10k and 100k events (parse, seq check, lock), and the recall sync."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kernel.store.session import Session
from protocol.events import ToolFinishedData, ToolStartedData, UserData

SIZES = (1_000, 10_000, 100_000)


def build(home: Path, workspace: Path, n: int) -> str:
    """A session of about `n` events: requests, tool starts and finishes."""
    with Session.create(home, workspace) as session:
        for i in range(n - 1):
            if i % 50 == 0:
                session.append(UserData(text=f"request {i}: make the tests pass"))
            elif i % 2:
                session.append(
                    ToolStartedData(call_id=f"c{i}", tool="bash", target="pytest -q", request="")
                )
            else:
                session.append(
                    ToolFinishedData(
                        call_id=f"c{i - 1}", tool="bash", status="ok", exit_code=0, text="ok " * 40
                    )
                )
        return session.id


def time_open(home: Path, session_id: str, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        Session.open(home, session_id).close()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def run() -> str:
    base = Path(tempfile.mkdtemp(prefix="jbo", dir="/tmp"))
    rows = ["| events | log size | Session.open median ms |", "|---|---|---|"]
    try:
        for n in SIZES:
            home, workspace = base / f"h{n}", base / "ws"
            workspace.mkdir(exist_ok=True)
            session_id = build(home, workspace, n)
            size = (home / session_id / "events.jsonl").stat().st_size
            rows.append(f"| {n:,} | {size / 1e6:.1f} MB | {time_open(home, session_id):.1f} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return "\n".join(rows)


if __name__ == "__main__":
    print(run())
