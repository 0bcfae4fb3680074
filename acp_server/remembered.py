"""A session's ACP mode and "always" answers, as its log recorded them, without reading all of
a long log at every `session/load` (issue 25).

The log is the truth: the last `mode` record, and every `approval` allowed for the session.
What a load folded is kept beside the log in `acp-modes.json` (the seq it was folded through,
the identity of that record, the mode, the tools), so the next load folds only the records
after it. The file is derived and disposable, as a context checkpoint is: it is used only
while the log still holds that same record at that seq (`record_digest`: after a power cut the
log may hold others there), ignored when missing, damaged or a link, and rewritten by the next
load that folds WORTH_SAVING records or more. Without it, the fold reads the log's bytes and
decodes only the chunks that hold such records (`LogEvents.of_kinds`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import msgspec

from kernel.store.event_log import record_digest
from kernel.store.log_events import LogEvents
from protocol.events import ApprovalData, Event, ModeData
from protocol.events import SessionMode as ModeId

if TYPE_CHECKING:
    from kernel.store.session import Session

NAME = "acp-modes.json"
FORMAT = 1
WORTH_SAVING = 4096  # records folded at a load before the result is kept for the next one
MODES: tuple[ModeId, ...] = ("auto", "ask")


class Saved(msgspec.Struct, kw_only=True):
    """The file: the fold of records 1..through."""

    format: int = FORMAT
    through: int
    digest: str  # record_digest of the log's record at `through`
    mode: ModeId
    always: list[str]


def recall(session: Session, mode: ModeId = "auto") -> tuple[ModeId, set[str]]:
    """The mode (`mode` when none is recorded) and the tools allowed for the session."""
    events = session.events
    through = len(events)  # seq n is record n (the log's seq continuity)
    saved = _read(session)
    always: set[str] = set()
    start = 1
    valid = saved is not None and 0 < saved.through <= through
    if saved is not None and valid and record_digest(events, saved.through) == saved.digest:
        mode, always, start = saved.mode, set(saved.always), saved.through + 1
    for event in _records(events, start):
        data = event.data
        if isinstance(data, ModeData):
            mode = data.mode
        elif isinstance(data, ApprovalData) and (data.scope, data.decision) == (
            "session",
            "allowed",
        ):
            always.add(data.tool)
    if through - start + 1 >= WORTH_SAVING and not session.read_only:
        _write(session, Saved(through=through, digest="", mode=mode, always=sorted(always)))
    return mode, always


def _records(events: Iterable[Event], start: int) -> Iterator[Event]:
    if isinstance(events, LogEvents):
        yield from events.of_kinds("mode", "approval", since=start)
        return
    yield from (e for e in events if (e.seq or 0) >= start)


def _read(session: Session) -> Saved | None:
    from kernel.store.guard import read_nofollow

    try:
        saved = msgspec.json.decode(read_nofollow(session.directory / NAME), type=Saved)
    except Exception:  # missing, a link, not ours: the log is read instead
        return None
    return saved if saved.format == FORMAT and saved.mode in MODES else None


def _write(session: Session, saved: Saved) -> None:
    from kernel.store.durable import write_atomic

    saved.digest = record_digest(session.events, saved.through)
    with contextlib.suppress(Exception):  # derived: a full disk only costs the next load a read
        write_atomic(session.directory, NAME, msgspec.json.encode(saved) + b"\n")
