"""Strict reading of events.jsonl lines: each decodes, is of this version, and follows in seq.

Line numbers are seq numbers: a log starts at seq 1 and goes up by one a line.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel.errors import CorruptLog, UnsupportedLogVersion
from protocol.codec import MalformedRecord, UnsupportedVersion, decode_event
from protocol.events import Event

UNCHANGED = "nothing was written"


def parse_log(
    buf: bytes | memoryview,
    name: str = "events.jsonl",
    first: int = 1,
    session_id: str | None = None,
) -> tuple[list[Event], int]:
    """Decode every complete line; return the events and the byte length they span.

    Bytes after the last newline are a torn tail and are not decoded. Any complete line that is
    malformed, of another version or out of sequence raises CorruptLog naming its line number.
    `first`: the line number (seq) of the first line of `buf`; with `session_id`, a line of
    another session is refused too.
    """
    data = bytes(buf) if isinstance(buf, memoryview) else buf
    events: list[Event] = []
    start, number = 0, first - 1
    while (stop := data.find(b"\n", start)) >= 0:
        number += 1
        event = _decode_line(data[start:stop], number, name)
        start = stop + 1
        if event.seq != number:
            expected = f"does not follow {number - 1}" if number > 1 else "is not 1"
            raise CorruptLog(f"{name} line {number}: seq {event.seq} {expected}; {UNCHANGED}")
        if session_id is not None and event.session_id != session_id:
            raise CorruptLog(
                f"{name} line {number} belongs to session {event.session_id}; {UNCHANGED}"
            )
        events.append(event)
    return events, start


def _decode_line(line: bytes, number: int, name: str) -> Event:
    try:
        event = decode_event(line)
    except UnsupportedVersion as exc:
        raise UnsupportedLogVersion(f"{name} line {number}: {exc}") from None
    except MalformedRecord as exc:
        raise CorruptLog(
            f"{name} line {number} is malformed ({exc}); nothing was written"
        ) from None
    if event.seq is None:
        raise CorruptLog(f"{name} line {number} has no seq; nothing was written")
    return event


def check_session(events: Sequence[Event], session_id: str, name: str = "events.jsonl") -> None:
    """The log starts with this session's `session` record and holds no other session's."""
    first = events[0] if events else None
    if first is None or first.kind != "session" or first.data.session_id != session_id:
        raise CorruptLog(
            f"{name} of session {session_id} does not start with its session record; "
            "nothing was written"
        )
    for number, event in enumerate(events, 1):
        if event.session_id != session_id:
            raise CorruptLog(f"{name} line {number} belongs to session {event.session_id}")
