"""`jev-harness inspect`: a harness session's status and receipt, settling a killed run.

A call left with `tool_started` and no end by a killed process gets `tool_uncertain` (cause
`kernel_exit`), and a run that has no `final` gets one (`blocked`). Nothing is re-run or
resumed: the task died with its process. A session still held by a live process is only read,
and so is a session jmp created: it is refused (exit 2, naming `jmp --session`) with its files
as they were, a torn tail included.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel.errors import SessionLocked, SessionNotFound, UsageError
from kernel.run.ledger import Ledger
from kernel.store.guard import check_session_dir, read_nofollow
from kernel.store.log_parse import parse_log
from protocol.events import Event

CREATED_BY = "jev-harness"


def inspect_session(home: Path, session_id: str) -> dict[str, Any]:
    """{"session_id", "status", "summary", "artifact"} after settling what a kill left open."""
    from kernel.store.session import Session

    if not Session.exists(home, session_id):
        raise SessionNotFound(f"no session {session_id!r} in {home}")
    # Read-only first: a session of jmp's is refused before opening it would archive a torn
    # tail and append to its log (the first record says who created it; it never changes).
    check_session_dir(home / session_id)
    events, _end = parse_log(read_nofollow(home / session_id / "events.jsonl"))
    _require_harness(events, session_id)
    try:
        session = Session.open(home, session_id, harness=True)
    except SessionLocked:
        return _summary(session_id, events, "running")
    try:
        _require_harness(session.events, session_id)
        _settle(session)
        return _summary(session_id, session.events, session.status)
    finally:
        session.close()


def _require_harness(events: Sequence[Event], session_id: str) -> None:
    created_by = getattr(events[0].data, "created_by", "jmp") if events else "jmp"
    if created_by != CREATED_BY:
        raise UsageError(
            f"session {session_id} was created by {created_by}, not jev-harness: "
            f"use jmp --session {session_id}"
        )


def _settle(session: Any) -> None:
    """Record what a killed run left open (the ledger's `settle`): uncertain calls, a final."""
    ledger = Ledger(session)
    open_calls = [c for c in ledger.settle() if c.uncertain is None]
    if session.status == "running":
        tools = ", ".join(c.started.tool for c in open_calls)
        what = (
            f"{len(open_calls)} operation(s) left uncertain ({tools})"
            if open_calls
            else "no operation was in flight"
        )
        ledger.end("blocked", f"the run process was killed; {what}")


def _summary(session_id: str, events: Sequence[Event], status: str) -> dict[str, Any]:
    final = next((e.data for e in reversed(events) if e.kind == "final"), None)
    receipt = next((e.data for e in reversed(events) if e.kind == "receipt"), None)
    artifact = None
    if receipt is not None:
        artifact = {
            k: getattr(receipt, k)
            for k in ("path", "exists", "match", "record_count", "digest", "sources", "verdict")
        }
    return {
        "session_id": session_id,
        "status": status,
        "summary": final.summary if final is not None else "",
        "artifact": artifact,
    }
