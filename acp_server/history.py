"""How much of a session `session/load` replays: its last turns, and a note for what it leaves.

ACP's `session/load` replays a conversation as `session/update` notifications before its
response. A session that one project has used for weeks holds hundreds of thousands of records
(a 100,000-record one replayed 100,000 updates, 31 MB, in about a minute): more than any editor
shows, and all of it before the editor gets its answer. So a load replays the last
`JMP_ACP_LOAD_TURNS` turns (default 50; a turn begins at a `user` record) and at most
RECORDS_PER_TURN records per turn asked for, found by reading the log backwards from its end,
so that its cost is the open's plus what it sends. What it leaves out it says twice: a first
`agent_message_chunk` the person sees, and the response's `_meta.jmp.replay` for a program.
`JMP_ACP_LOAD_TURNS=0` replays the whole history, as before. Nothing is removed from the
session: its log, its recall and the models' context are what they were.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from acp import update_agent_message_text
from acp.schema import AgentMessageChunk

from acp_server.config import ENV, LOAD_TURNS, load_turns  # noqa: F401 (read here too)
from protocol.events import Event, UserData

RECORDS_PER_TURN = 200  # a longer turn is replayed from its middle (its last records)


@dataclass(frozen=True)
class Window:
    """Records `start`..`end`-1 (0-based) of a log of `end` records; `turns`: how many turns
    begin in it (counted only when records are left out)."""

    start: int
    end: int
    turns: int = 0

    @property
    def omitted(self) -> int:
        """Records before the window (the session's own record among them)."""
        return self.start

    def meta(self, updates: int, turns: int, limit: int) -> dict[str, Any]:
        """The response's `_meta`: what was replayed (records from seq `start + 1` on, as
        `updates` notifications, `turns` requests among them), and what was not."""
        replay = {
            "records": self.end,
            "from_seq": self.start + 1,
            "omitted_records": self.omitted,
            "turns": turns,
            "updates": updates,
            "limit_turns": limit,
        }
        return {"jmp": {"replay": replay}}


def window(events: Sequence[Event], turns: int) -> Window:
    """The records a load replays: from the start of the `turns`-th last turn, at most
    `turns * RECORDS_PER_TURN` records back (then from the first turn that begins within
    them, or from that bound when one turn fills them all); everything when `turns` is 0.
    Reads backwards from the end: only the records it returns, and a chunk more."""
    end = len(events)
    if turns <= 0:
        return Window(0, end)
    floor = max(0, end - turns * RECORDS_PER_TURN)
    found, earliest = 0, -1
    for i in range(end - 1, floor - 1, -1):
        if isinstance(events[i].data, UserData):
            found, earliest = found + 1, i
            if found == turns:
                return Window(i, end, found)
    if floor == 0:
        return Window(0, end, found)
    if earliest >= 0:
        return Window(earliest, end, found)
    return Window(floor, end)


def note(shown: Window) -> AgentMessageChunk | None:
    """The first update of a replay that leaves records out, in the person's words."""
    if shown.omitted <= 1:  # only the session record: nothing a person would miss
        return None
    which = f"the last {shown.turns:,} requests" if shown.turns > 1 else "the last request"
    if not shown.turns:
        which = "the end of the last request"  # one turn longer than the bound
    text = (
        f"(Earlier history not shown: records 1 to {shown.omitted:,} of this session's "
        f"{shown.end:,} are not replayed here; what follows is {which}. jmp keeps the whole "
        f"history. Set {ENV}=0 to replay all of it, or a number of requests.)\n\n"
    )
    return update_agent_message_text(text)


class Tail(Sequence[Event]):
    """Records start..end-1 of `events` as a sequence of their own, read on demand."""

    def __init__(self, events: Sequence[Event], start: int, end: int) -> None:
        self._events, self._start, self._end = events, start, end

    def __len__(self) -> int:
        return self._end - self._start

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("event index out of range")
        return self._events[self._start + index]

    def __iter__(self) -> Iterator[Event]:
        for i in range(self._start, self._end):
            yield self._events[i]
