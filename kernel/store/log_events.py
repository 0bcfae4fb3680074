"""A session's records as a sequence read from events.jsonl on demand (issue 25).

Opening a session decodes only the records after the index's last verified prefix (fewer than
a stride, kernel/store/log_index.py) and the first one; every other record is read from the
log when asked for, a chunk of `stride` lines at a time, and each chunk is checked against its
digest in the index before one of its records is handed out: a line changed after it was
verified raises CorruptLog naming its lines wherever it is read (projection, recall, compact,
replay). A few chunks are kept decoded, so memory does not grow with history; what is appended
while the session is open is kept, as before.

The reading API (for the front ends that page history, e.g. ACP session/load):

- `len(events)`, `events[i]` (record seq i+1), `events[a:b]` (a list), iteration in order;
- `events.since(seq)`: the records from `seq` on, read chunk by chunk (the cheap way to page
  forwards: memory stays a few chunks);
- `reversed(events)`: newest first, read chunk by chunk backwards (the cheap way to find the
  last N turns: stop when enough was seen);
- `events.first`: the session record (decoded at open); `events.settled` and `events.resume`:
  the seq before which every tool call but those `resume`'s records name has its outcome
  (`events.pending()`, what kernel/store/pending.py reads: those records and what follows);
- `events.of_kinds(...)`: the records of some kinds, reading only the chunks whose summary in
  the index names one of them.

Every read may raise CorruptLog (a changed line); none writes anything.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import overload

from kernel.errors import CorruptLog
from kernel.store import log_index
from kernel.store.log_index import Entry
from kernel.store.log_parse import parse_log
from protocol.events import Event

CACHED_CHUNKS = 4


class LogEvents(Sequence[Event]):
    """Records 1..len(self) of one session: the verified prefix, read on demand, then `tail`
    (decoded, and grown by `append`). Holds its own read-only descriptor of the log."""

    def __init__(
        self,
        fd: int,
        name: str,
        session_id: str,
        entries: list[Entry],
        tail: list[Event],
        first: Event | None = None,
        settled: int = 0,
        resume: list[Event] | None = None,
    ) -> None:
        """`first`: record 1 when the prefix holds it (decoded at open); `settled`: the
        watermark, `resume`: the records up to it of the calls still open there
        (kernel/store/pending.py)."""
        self._fd = os.dup(fd)
        weakref.finalize(self, _close, self._fd)
        self._name = name
        self._session_id = session_id
        self._entries = entries
        self._prefix = entries[-1].seq if entries else 0
        self._tail = tail
        self._first = first if entries else None
        self.settled = settled
        self.resume = resume or []
        self._chunks: OrderedDict[int, list[Event]] = OrderedDict()
        self._reading = threading.Lock()  # the chunk cache: the commit thread reads too

    @property
    def first(self) -> Event:
        """Record 1, the session record (IndexError when there is none)."""
        return self[0]

    @property
    def prefix(self) -> int:
        """How many records are read from the log on demand (the verified prefix)."""
        return self._prefix

    def __len__(self) -> int:
        return self._prefix + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("event index out of range")
        return self._at(index)

    def _at(self, index: int) -> Event:
        if index >= self._prefix:
            return self._tail[index - self._prefix]
        if index == 0 and self._first is not None:
            return self._first  # the session's header: every open reads it
        stride = self._stride()
        return self._chunk(index // stride)[index % stride]

    def __iter__(self) -> Iterator[Event]:
        for k in range(len(self._entries)):
            yield from self._chunk(k)
        i = 0
        while i < len(self._tail):  # a record appended meanwhile is seen, as a list would
            yield self._tail[i]
            i += 1

    def __reversed__(self) -> Iterator[Event]:
        for i in range(len(self._tail) - 1, -1, -1):
            yield self._tail[i]
        for k in range(len(self._entries) - 1, -1, -1):
            yield from reversed(self._chunk(k))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def append(self, event: Event) -> None:
        """Keep a record just appended to the log."""
        self._tail.append(event)

    def since(self, seq: int) -> Iterator[Event]:
        """The records from `seq` on (seq 1 is the first)."""
        start = max(seq, 1) - 1
        if start >= self._prefix:
            yield from self._tail[start - self._prefix :]
            return
        stride = self._stride()
        first = start // stride
        yield from self._chunk(first)[start % stride :]
        for k in range(first + 1, len(self._entries)):
            yield from self._chunk(k)
        yield from self._tail

    def pending(self) -> Iterator[Event]:
        """What kernel/store/pending.py reads: the records up to the watermark that rebuild the
        calls open there (`resume`, decoded at open), then every record after it."""
        yield from self.resume
        yield from self.since(self.settled + 1)

    def of_kinds(self, *kinds: str, since: int = 1) -> Iterator[Event]:
        """The records of these kinds from seq `since` on, in log order, for a caller after
        rare ones (ACP's mode and approvals at `session/load`): only the verified chunks whose
        summary in the index names one of them are read (and decoded), so a long log costs
        the chunks that hold such records, not a read of its bytes (issue 33)."""
        bits = log_index.kind_bits(kinds) | log_index.OTHER
        for k, entry in enumerate(self._entries):
            if entry.seq >= since and entry.kinds & bits:
                chosen = self._chunk(k)
                yield from (e for e in chosen if e.kind in kinds and (e.seq or 0) >= since)
        i = max(since - 1 - self._prefix, 0)
        while i < len(self._tail):
            if self._tail[i].kind in kinds:
                yield self._tail[i]
            i += 1

    def _stride(self) -> int:
        return self._entries[0].seq

    def _chunk(self, k: int) -> list[Event]:
        with self._reading:
            cached = self._chunks.get(k)
            if cached is not None:
                self._chunks.move_to_end(k)
                return cached
        events = read_chunk(self._fd, self._name, self._session_id, self._entries, k)
        with self._reading:
            self._chunks[k] = events
            while len(self._chunks) > CACHED_CHUNKS:
                self._chunks.popitem(last=False)
        return events


def check_chunk(fd: int, name: str, session_id: str, entries: list[Entry], k: int) -> bytes:
    """Chunk k's bytes, hashed (not decoded) and checked against the index: CorruptLog naming
    its lines when they changed."""
    entry = entries[k]
    previous = entries[k - 1] if k else log_index.START
    size = entry.offset - previous.offset
    data = os.pread(fd, size, previous.offset)
    if len(data) == size and log_index.chain(previous.digest, data) == entry.digest:
        return data
    raise CorruptLog(
        f"{name} lines {previous.seq + 1}-{entry.seq} changed after they were written and "
        f"verified (their bytes no longer match {log_index.NAME}): the log was edited or damaged "
        f"on disk. `jmp --session {session_id} --verify` checks every line; nothing was written"
    )


def read_chunk(fd: int, name: str, session_id: str, entries: list[Entry], k: int) -> list[Event]:
    """Chunk k's records, after checking its bytes against the index (CorruptLog if not)."""
    return decode_chunk(check_chunk(fd, name, session_id, entries, k), name, session_id, entries, k)


def decode_chunk(
    data: bytes, name: str, session_id: str, entries: list[Entry], k: int
) -> list[Event]:
    """The records of chunk k's bytes (checked by `check_chunk`)."""
    previous = entries[k - 1] if k else log_index.START
    first, last = previous.seq + 1, entries[k].seq
    events, end = parse_log(data, name, first, session_id)
    if end != len(data) or len(events) != last - previous.seq:  # only a forged index gets here
        raise CorruptLog(f"{name} lines {first}-{last} do not match {log_index.NAME}")
    return events


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
