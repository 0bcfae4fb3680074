"""events.jsonl: strict reading with torn-tail recovery, and appends with optional fsync.

Opened with its session's id, the log is read through events.index (kernel/store/log_index.py):
only the records after its last verified prefix are decoded, the first and the last verified
chunk are checked against their digests, and the rest is read on demand (log_events.py). The
index is extended, fsynced, only with lines an fsync of the log has covered.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from kernel.errors import CorruptLog, LogReplaced, StorageError
from kernel.store import log_index
from kernel.store.durable import write_all
from kernel.store.guard import open_nofollow, storage_error
from kernel.store.log_events import LogEvents, check_chunk, decode_chunk
from kernel.store.log_index import Chainer, Entry, IndexWriter
from kernel.store.log_parse import UNCHANGED, check_session, parse_log
from kernel.store.pending import Settling
from kernel.store.torn_tail import TornTail, recover_torn_tail
from protocol.codec import encode_event
from protocol.events import Event


def record_digest(events: Sequence[Event], seq: int) -> str:
    """The identity of the record at `seq` in this log ("" when it holds none): a cache
    derived from the log (the recall index, a checkpoint) stores it beside its watermark and
    is trusted only while the log still holds that same record there. After a power cut the
    log may be shorter, and then grow other records under the same numbers."""
    if seq <= 0 or not events:
        return ""
    index = seq - (events[0].seq or 0)
    if not 0 <= index < len(events) or events[index].seq != seq:
        return ""
    return hashlib.sha256(encode_event(events[index])).hexdigest()[:32]


class EventLog:
    """One session's append-only log. Call load() (or create()) under the session lock.

    The descriptor opened by load()/create() is the only one ever written. Before each append
    it is compared with the path (device, inode, link count): a log that was replaced, moved or
    removed under the session raises LogReplaced instead of writing into a file nobody reads.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.torn: list[TornTail] = []  # archived by load(), each to be reported and finished
        self._fd: int | None = None
        self._read_only = False
        self._synced = 0  # the size an fsync last covered (or the size when loaded)
        self._index: _Indexing | None = None
        self.older_index: int | None = None  # load() found an index of this older format

    def start_index(self, session_id: str) -> None:
        """Keep events.index for a log created empty here (before its first append)."""
        self._index = _Indexing(session_id, log_index.STRIDE, [], Chainer(), 0, 0, None, Settling())

    def create(self, first: Event) -> LogEvents:
        """Create the log (it must not exist) holding `first`, fsynced; its events."""
        self._open_for_append(os.O_EXCL)
        self.start_index(first.session_id)
        self.append(first, durable=True)
        assert self._fd is not None and self._index is not None
        events = LogEvents(self._fd, self.path.name, first.session_id, [], [first], None, 1)
        self._index.events = events
        return events

    def _open_for_append(self, extra: int = 0) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | extra
        try:
            self._fd = open_nofollow(self.path, flags)
        except OSError as exc:
            raise storage_error("open the event log", self.path, exc) from None

    def load(
        self, session_id: str | None = None, writable: bool = True, verify: bool = False
    ) -> list[Event] | LogEvents:
        """Read the events; a torn tail is archived beside the log and cut (see `torn`).

        A corrupt complete line (or, given session_id, a log that is not that session's)
        raises CorruptLog and leaves the file byte-for-byte unchanged. With writable False
        (read-only storage) nothing is changed: a torn tail is only left out.

        Given session_id, the events come back as a LogEvents read through events.index: only
        what follows its last verified prefix is decoded, and the index is rebuilt by a full
        check when it is missing, damaged or not this log's. `verify` checks every line now,
        whatever the index says (and rewrites the index when it differed).
        """
        flags = (os.O_RDWR | os.O_APPEND) if writable else os.O_RDONLY
        try:
            fd = open_nofollow(self.path, flags | os.O_NONBLOCK)
        except OSError as exc:
            raise storage_error("open the event log", self.path, exc) from None
        self.close()
        self._fd, self._read_only = fd, not writable
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CorruptLog(f"{self.path} is not a regular file; {UNCHANGED}")
            if session_id is not None:
                return self._load_indexed(fd, session_id, writable, verify)
            buf = _read_all(fd)
        except OSError as exc:
            raise storage_error("read the event log", self.path, exc) from None
        events, end = parse_log(buf, self.path.name)
        self._synced = end  # as far as anyone can know: what a later failed fsync cuts back to
        if writable:
            self.torn = self._cut_tail(buf[end:], end)
        return events

    def _load_indexed(self, fd: int, session_id: str, writable: bool, verify: bool) -> LogEvents:
        name = self.path.name
        size = os.fstat(fd).st_size
        found = None if verify else log_index.read(self.path.parent, session_id)
        stride, kept = log_index.STRIDE, None
        entries: list[Entry] = []
        if found is not None:
            stride, entries, _damaged = found  # a damaged end is cut when next appended to
            kept = len(entries)
        elif not verify:
            self.older_index = log_index.older_format(self.path.parent, session_id)
        first = self._check_ends(fd, session_id, entries, size)
        resume, settling, settled = self._resume(fd, session_id, entries)
        base = entries[-1] if entries else log_index.START
        scan = _Scan(fd, name, session_id, stride, settling, base)
        scan.run(size)
        if not entries and scan.first is None:  # empty, or only a torn line: not a session log
            check_session([], session_id, name)
        if verify:
            kept = self._verified_against_index(session_id, scan.entries)
        if writable:
            self.torn = self._cut_tail(scan.torn if scan.end < size else b"", scan.end)
        new = scan.entries
        entries = [*entries, *new]
        if scan.settled >= 0:  # settled after the index's end: nothing before it is open
            settled, resume = scan.settled, []
        writer = IndexWriter(self.path.parent, session_id, stride, kept) if writable else None
        self._index = _Indexing(
            session_id, stride, entries, scan.chainer, len(scan.tail), scan.end, writer, settling
        )
        self._index.kinds = scan.kinds
        self._synced = scan.end
        if new and writable:
            os.fsync(fd)  # the index names only lines an fsync covered
            self._index.flush(self.path.parent)
        first = first or scan.first
        events = LogEvents(fd, name, session_id, entries, scan.tail, first, settled, resume)
        self._index.events = events
        return events

    def _resume(
        self, fd: int, session_id: str, entries: list[Entry]
    ) -> tuple[list[Event], Settling, int]:
        """The calls open at the index's end, rebuilt from the records its last entry names
        (a few lines, whatever the log's length; after an overflow, every record from the
        oldest of them): those records, the Settling fed with them, and the seq after which
        pending.py reads every record."""
        name, settling = self.path.name, Settling()
        if not entries:
            return [], settling, 0
        last = entries[-1]
        stride = entries[0].seq
        if last.overflow:  # more calls open than an entry names: read from the oldest on
            start = last.resume[0]
            for k in range((start - 1) // stride, len(entries)):
                data = check_chunk(fd, name, session_id, entries, k)
                for event in decode_chunk(data, name, session_id, entries, k):
                    settling.add(event)
            return [], settling, start - 1
        records: list[Event] = []
        chunks: dict[int, list[bytes]] = {}
        for seq in last.resume:
            k = (seq - 1) // stride
            if k not in chunks:
                chunks[k] = check_chunk(fd, name, session_id, entries, k).split(b"\n")
            line = chunks[k][(seq - 1) % stride] + b"\n"
            records.extend(parse_log(line, name, seq, session_id)[0])
        for event in records:
            settling.add(event)
        return records, settling, last.seq

    def _check_ends(
        self, fd: int, session_id: str, entries: list[Entry], size: int
    ) -> Event | None:
        """Hash (not decode) the first and the last verified chunk; decode record 1 only.
        CorruptLog when one changed or the log is shorter than its index."""
        name = self.path.name
        if not entries:
            return None
        if entries[-1].offset > size:
            raise CorruptLog(
                f"{name} ends before line {entries[-1].seq}, which was written and "
                f"verified ({log_index.NAME}): records were lost (if an older copy of the "
                f"log was put back on purpose, remove {log_index.NAME}); {UNCHANGED}"
            )
        head = check_chunk(fd, name, session_id, entries, 0)
        first = parse_log(head[: head.find(b"\n") + 1], name)[0]
        check_session(first, session_id, name)
        if len(entries) > 1:
            check_chunk(fd, name, session_id, entries, len(entries) - 1)
        return first[0]

    def _verified_against_index(self, session_id: str, entries: list[Entry]) -> int | None:
        """How many entries of the index on disk the full check confirmed (None: none is there
        to confirm, or it has to be written afresh); CorruptLog naming the lines whose bytes
        differ from what it verified."""
        old = log_index.read(self.path.parent, session_id)
        if old is None or old[0] != log_index.STRIDE:
            return None
        for k, (was, now) in enumerate(zip(old[1], entries, strict=False)):
            if was.digest == now.digest and was != now:
                return None  # the index's state was wrong (forged): written afresh
            if was != now:
                first = k * log_index.STRIDE + 1
                raise CorruptLog(
                    f"{self.path.name} lines {first}-{was.seq} changed after they were written "
                    f"and verified (their bytes no longer match {log_index.NAME}): the log was "
                    f"edited or damaged on disk; {UNCHANGED}"
                )
        if len(old[1]) > len(entries):
            raise CorruptLog(
                f"{self.path.name} ends before line {old[1][-1].seq}, which was written and "
                f"verified ({log_index.NAME}): records were lost; {UNCHANGED}"
            )
        return len(old[1])

    def _cut_tail(self, tail: bytes, end: int) -> list[TornTail]:
        assert self._fd is not None
        return recover_torn_tail(self.path, self._fd, tail, end)

    def append(self, event: Event, durable: bool = False) -> None:
        """Write one full line (`write`); fsync when durable (then it survives power loss).

        A session appends through its group commit (kernel/store/commit.py) instead, which
        writes with `write` and fsyncs once per round with `sync` (after `note`)."""
        self.note(event)
        self.write(encode_event(event) + b"\n", event.kind)
        if durable:
            self.sync()

    def note(self, event: Event) -> None:
        """Tell the index the record about to be written (in seq order, before its `write`):
        the settled mark of the entry it may end is kept from it (kernel/store/pending.py)."""
        if self._index is not None:
            self._index.note(event)

    def write(self, line: bytes, kind: str) -> None:
        """Write one encoded line with O_APPEND, not fsynced. A failed write (a full disk) is
        cut back, so the log never keeps half a line; StorageError names the record."""
        if self._fd is None and not self._read_only:
            self._open_for_append()
        if self._fd is None or self._read_only:
            raise StorageError(f"cannot append to {self.path}: the session is open read-only")
        size = self._check_same()
        try:
            write_all(self._fd, line)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            if self._index is not None:
                self._index.broken = True  # the session stops: the next open rebuilds it
            raise storage_error(f"append the {kind} record to", self.path, exc) from None
        if self._index is not None:
            self._index.wrote(line)

    def sync(self) -> None:
        """fsync what was written; StorageError naming the log when the disk refuses it.

        After a failed fsync the lines written since the last one that succeeded are cut off
        again (and that fsynced): Linux may have dropped their pages or kept them, so a later
        open would find them or not, and a later fsync would never write them; cut, the log
        is what the disk holds. The error says whether the cut succeeded."""
        if self._fd is None:
            return
        size = os.fstat(self._fd).st_size
        try:
            os.fsync(self._fd)
        except OSError as exc:
            if self._index is not None:
                self._index.broken = True  # lines are cut back: its count no longer holds
            raise StorageError(
                str(storage_error("fsync", self.path, exc)) + "; " + self._cut_back()
            ) from None
        self._synced = size
        if self._index is not None and self._index.pending:
            self._index.flush(self.path.parent, size)

    def _cut_back(self) -> str:
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._synced)
            os.fsync(self._fd)
        except OSError as exc:
            return (
                f"cutting it back to its last fsynced record failed too ({exc.strerror}): the "
                "records written since may or may not be there when it is opened again"
            )
        return "the records written since its last successful fsync were cut off again"

    def _check_same(self) -> int:
        """The open log's size, after checking it is still the file at `path`."""
        assert self._fd is not None
        held = os.fstat(self._fd)
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            now = None
        if held.st_nlink == 0 or now is None:
            raise LogReplaced(f"{self.path} was removed while the session ran; {_STOPPED}")
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            raise LogReplaced(f"{self.path} was replaced while the session ran; {_STOPPED}")
        return held.st_size

    def close(self) -> None:
        """Close the append handle; idempotent. Index entries still waiting for an fsync of
        the lines they name get it first."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._index is not None and self._index.pending:
                with contextlib.suppress(OSError):
                    os.fsync(fd)
                    self._index.flush(self.path.parent)
        finally:
            self._index = None
            os.close(fd)


class _Indexing:
    """The index's side of the appends: the running digest, and the entries due once an fsync
    of the log covers their lines."""

    def __init__(
        self,
        session_id: str,
        stride: int,
        entries: list[Entry],
        chainer: Chainer,
        count: int,
        offset: int,
        writer: IndexWriter | None,
        settling: Settling,
    ) -> None:
        self.session_id, self.stride, self.entries = session_id, stride, list(entries)
        self.chainer, self.count, self.offset, self.writer = chainer, count, offset, writer
        self.seq = (entries[-1].seq if entries else 0) + count
        self.pending = False  # entries made since the last flush
        self.broken = False  # a write or fsync of the log failed: no entry is written after
        self.settling = settling
        self.marks: dict[int, tuple[tuple[int, ...], int]] = {}  # noted, not yet written:
        # an entry's end seq -> its calls' resume seqs and its chunk's kinds
        self.kinds = 0  # the kinds noted in the chunk being noted
        self.events: LogEvents | None = None  # the open log's records: their watermark

    def note(self, event: Event) -> None:
        """Called by the appending thread, in seq order, before the line is written."""
        self.settling.add(event)
        seq = event.seq or 0
        self.kinds |= log_index.kind_bits((event.kind,))
        if self.settling.settled and self.events is not None:
            self.events.settled, self.events.resume = seq, []
        if seq % self.stride == 0:
            self.marks[seq] = (self.settling.resume(), self.kinds)
            self.kinds = 0

    def wrote(self, line: bytes) -> None:
        self.chainer.update(line)
        self.count, self.offset, self.seq = self.count + 1, self.offset + len(line), self.seq + 1
        if self.count == self.stride:
            resume, kinds = self.marks.pop(self.seq, _UNKNOWN)  # not noted: read from record 1
            digest = self.chainer.close()
            self.entries.append(log_index.mark(self.seq, self.offset, digest, resume, kinds))
            self.count, self.pending = 0, True

    def flush(self, directory: Path, synced: int | None = None) -> None:
        """Write the entries made so far whose lines end within `synced` bytes (all when None):
        call only after an fsync of the log covered them."""
        if self.broken:
            return
        if self.writer is None:
            if self.session_id and self.pending:  # a log created here: its first entry
                self.writer = IndexWriter(directory, self.session_id, self.stride, None)
            else:
                return
        self.writer.directory = directory  # a new session's directory was renamed into place
        due = self.entries
        if synced is not None and due and due[-1].offset > synced:
            due = [e for e in due if e.offset <= synced]
        self.writer.write(due)
        self.pending = len(due) < len(self.entries)


_UNKNOWN = ((1,) * (log_index.RESUME + 1), (1 << 32) - 1)  # an overflow from 1, every kind


class _Scan:
    """The strict, streaming check of the log from an entry on: every complete line decodes,
    follows in seq and is this session's (log_parse.py); every full chunk of `stride` lines
    becomes an entry (digest and settled mark). Only the records after the last full chunk are
    kept decoded (`tail`), so memory does not grow with the log: a first open (no index) and
    --verify read a 1M-record log in constant memory."""

    BLOCK = 1 << 22

    def __init__(
        self, fd: int, name: str, session_id: str, stride: int, settling: Settling, base: Entry
    ) -> None:
        self.fd, self.name, self.session_id, self.stride = fd, name, session_id, stride
        self.settling = settling
        self.base = base
        self.entries: list[Entry] = []
        self.tail: list[Event] = []
        self.chainer = Chainer(base.digest)
        self.first: Event | None = None
        self.end = base.offset  # the end of the last complete line
        self.torn = b""  # the bytes after it
        self.kinds = 0  # the kinds in the chunk being read
        self.settled = -1  # the last seq after which every call had its outcome (-1: none)

    def run(self, size: int) -> None:
        position, carry = self.base.offset, b""
        seq, count = self.base.seq, 0
        while position < size:
            block = os.pread(self.fd, min(self.BLOCK, size - position), position)
            if not block:
                break
            position += len(block)
            data = carry + block if carry else block
            complete = data.rfind(b"\n") + 1
            carry = data[complete:]
            start = 0
            while start < complete:
                stop, lines = start, 0
                while lines < self.stride - count:
                    found = data.find(b"\n", stop, complete)
                    if found < 0:
                        break
                    stop, lines = found + 1, lines + 1
                piece = data[start:stop]
                if seq == 0:  # the first line is named as not this session's record first
                    head = parse_log(piece[: piece.find(b"\n") + 1], self.name)[0]
                    check_session(head, self.session_id, self.name)
                events, _ = parse_log(piece, self.name, seq + 1, self.session_id)
                if seq == 0:
                    self.first = events[0]
                self.settle(events)
                self.kinds |= log_index.kind_bits({e.kind for e in events})
                self.chainer.update(piece)
                seq, count, self.end = seq + lines, count + lines, self.end + len(piece)
                start = stop
                if count == self.stride:
                    resume, digest = self.settling.resume(), self.chainer.close()
                    self.entries.append(log_index.mark(seq, self.end, digest, resume, self.kinds))
                    count, self.tail, self.kinds = 0, [], 0
                else:
                    self.tail.extend(events)
        self.torn = carry

    def settle(self, events: list[Event]) -> None:
        add, settling = self.settling.add, self.settling
        for event in events:
            add(event)
            if settling.settled:
                self.settled = event.seq or 0


_STOPPED = (
    "the run stopped rather than write into a file nobody reads (a tool or a shell command "
    "changed jmp's own log); nothing more was written"
)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
