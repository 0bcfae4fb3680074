"""A session writer that does what a tool step does, for power-cut tests.

    python -m tests.fakes.stepper HOME WORKSPACE STEPS

Creates a session in HOME and prints every record its subscriber is handed, one JSON line
each. Then STEPS steps, each as kernel/run/ledger.py orders them: the request artifact,
`tool_started` (durable), the output and result artifacts, `tool_finished`, then the next
route's records (`model_started`, `usage`, `route`). Then prints `done N` (N: the records
appended so far) and goes on stepping, one step each 20 ms, until it is killed. Every artifact
holds `text(call_id)`, so a reader can tell a complete one from a short one.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kernel.store.session import Session
from protocol.codec import encode_event
from protocol.events import (
    Event,
    ModelStartedData,
    RouteData,
    ToolFinishedData,
    ToolStartedData,
    UsageData,
)

_out = threading.Lock()


def text(call_id: str) -> str:
    """An artifact's whole content: about 6 KB, so a torn copy can stop inside a page."""
    return f"output of {call_id}: " + "0123456789abcdef" * 384 + "\n"


def say(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def announced(event: Event) -> None:
    say(encode_event(event).decode())


def _unsynced(session: Session) -> dict[str, Any]:
    """How a step wrote outputs before issue 21 (`durable=False`: no fsync), where the
    artifacts still take the flag: so the tests that use this writer run on that code too."""
    flags = inspect.signature(session.artifacts.write_text).parameters
    return {"durable": False} if "durable" in flags else {}


def step(session: Session, n: int) -> None:
    call_id = f"call{n:05d}"
    body = text(call_id)
    request = session.artifacts.write_json(f"{call_id}.request.json", {"body": body})
    session.append(
        ToolStartedData(call_id=call_id, tool="bash", target=f"step {n}", request=request),
        durable=True,
    )
    unsynced = _unsynced(session)
    output = session.artifacts.write_text(f"{call_id}.output.txt", body, **unsynced)
    result = session.artifacts.write_json(f"{call_id}.result.json", {"body": body}, **unsynced)
    session.append(
        ToolFinishedData(
            call_id=call_id,
            tool="bash",
            status="ok",
            exit_code=0,
            text=body[:80],
            artifact=result,
            full_output=output,
        )
    )
    session.append(ModelStartedData(stage="route", model="jev"))
    session.append(UsageData(provider="typesafe", stage="route", model="jev", seconds=0.01))
    session.append(RouteData(choice="bash", confidence=0.9, context_bytes=10, probabilities={}))


def main(argv: list[str]) -> int:
    home, workspace, steps = Path(argv[0]), Path(argv[1]), int(argv[2])
    session = Session.create(home, workspace, on_event=announced)
    n = 0
    while n < steps:
        n += 1
        step(session, n)
    say(f"done {len(session.events)}")
    while True:
        n += 1
        step(session, n)
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
