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
import time
from collections.abc import Sequence
from pathlib import Path

from kernel.errors import CorruptLog, LogReplaced, StorageError
from kernel.store import log_index
from kernel.store.durable import fsync_dir, write_all
from kernel.store.guard import open_nofollow, storage_error
from kernel.store.log_events import LogEvents, read_chunk
from kernel.store.log_index import Chainer, Entry, IndexWriter
from kernel.store.log_parse import UNCHANGED, check_session, parse_log
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


class TornTail:
    """The incomplete last line that load() moved out of the log."""

    def __init__(self, archive: Path, size: int) -> None:
        self.archive = archive
        self.size = size

    def describe(self) -> str:
        return (
            f"the last line of events.jsonl was incomplete ({self.size} bytes, a write cut "
            f"short); it was moved to {self.archive.name} and removed from the log"
        )


class EventLog:
    """One session's append-only log. Call load() (or create()) under the session lock.

    The descriptor opened by load()/create() is the only one ever written. Before each append
    it is compared with the path (device, inode, link count): a log that was replaced, moved or
    removed under the session raises LogReplaced instead of writing into a file nobody reads.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.torn: TornTail | None = None
        self._fd: int | None = None
        self._read_only = False
        self._synced = 0  # the size an fsync last covered (or the size when loaded)
        self._index: _Indexing | None = None

    def start_index(self, session_id: str) -> None:
        """Keep events.index for a log created empty here (before its first append)."""
        self._index = _Indexing(session_id, log_index.STRIDE, [], Chainer(), 0, 0, None)

    def create(self, first: Event) -> LogEvents:
        """Create the log (it must not exist) holding `first`, fsynced; its events."""
        self._open_for_append(os.O_EXCL)
        self.start_index(first.session_id)
        self.append(first, durable=True)
        assert self._fd is not None
        return LogEvents(self._fd, self.path.name, first.session_id, [], [first])

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
        if end < len(buf) and writable:
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
            if entries and entries[-1].offset > size:
                raise CorruptLog(
                    f"{name} ends before line {entries[-1].seq}, which was written and "
                    f"verified ({log_index.NAME}): records were lost (if an older copy of the "
                    f"log was put back on purpose, remove {log_index.NAME}); {UNCHANGED}"
                )
            if entries:
                first = read_chunk(fd, name, session_id, entries, 0)
                check_session(first[:1], session_id, name)
                if len(entries) > 1:
                    read_chunk(fd, name, session_id, entries, len(entries) - 1)
        base = entries[-1] if entries else Entry(0, 0, b"")
        buf = _pread_all(fd, size - base.offset, base.offset)
        if not entries:  # the first line is named as not this session's record first
            first_line = buf[: buf.find(b"\n") + 1]
            check_session(parse_log(first_line, name)[0], session_id, name)
        events, end = parse_log(buf, name, base.seq + 1, session_id)
        new, covered = log_index.boundaries(buf, end, stride, base)
        if verify:
            kept = self._verified_against_index(session_id, new)
        if end + base.offset < size and writable:
            self.torn = self._cut_tail(buf[end:], base.offset + end)
        entries = [*entries, *new]
        tail = events[len(new) * stride :]
        chainer = Chainer(entries[-1].digest if entries else b"")
        chainer.update(memoryview(buf)[covered:end])
        writer = IndexWriter(self.path.parent, session_id, stride, kept) if writable else None
        self._index = _Indexing(
            session_id, stride, entries, chainer, len(tail), base.offset + end, writer
        )
        self._synced = base.offset + end
        if new and writable:
            os.fsync(fd)  # the index names only lines an fsync covered
            self._index.flush(self.path.parent)
        return LogEvents(fd, name, session_id, entries, tail)

    def _verified_against_index(self, session_id: str, entries: list[Entry]) -> int | None:
        """How many entries of the index on disk the full check confirmed (None: none is there
        to confirm); CorruptLog naming the lines whose bytes differ from what it verified."""
        old = log_index.read(self.path.parent, session_id)
        if old is None or old[0] != log_index.STRIDE:
            return None
        for k, (was, now) in enumerate(zip(old[1], entries, strict=False)):
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

    def _cut_tail(self, tail: bytes, end: int) -> TornTail:
        # Archive first and make it durable, so the torn bytes exist somewhere at every instant.
        stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
        archive = self.path.with_name(f"{self.path.name}.torn-{stamp}")
        assert self._fd is not None
        try:
            _write_durable(archive, tail)
            os.ftruncate(self._fd, end)
            os.fsync(self._fd)
        except OSError as exc:
            raise storage_error("archive the torn last line of", self.path, exc) from None
        return TornTail(archive, len(tail))

    def append(self, event: Event, durable: bool = False) -> None:
        """Write one full line (`write`); fsync when durable (then it survives power loss).

        A session appends through its group commit (kernel/store/commit.py) instead, which
        writes with `write` and fsyncs once per round with `sync`."""
        self.write(encode_event(event) + b"\n", event.kind)
        if durable:
            self.sync()

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
    ) -> None:
        self.session_id, self.stride, self.entries = session_id, stride, list(entries)
        self.chainer, self.count, self.offset, self.writer = chainer, count, offset, writer
        self.seq = (entries[-1].seq if entries else 0) + count
        self.pending = False  # entries made since the last flush
        self.broken = False  # a write or fsync of the log failed: no entry is written after

    def wrote(self, line: bytes) -> None:
        self.chainer.update(line)
        self.count, self.offset, self.seq = self.count + 1, self.offset + len(line), self.seq + 1
        if self.count == self.stride:
            self.entries.append(Entry(self.seq, self.offset, self.chainer.close()))
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


_STOPPED = (
    "the run stopped rather than write into a file nobody reads (a tool or a shell command "
    "changed jmp's own log); nothing more was written"
)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    chunks = []
    while size > 0 and (chunk := os.pread(fd, min(size, 1 << 24), offset)):
        chunks.append(chunk)
        offset, size = offset + len(chunk), size - len(chunk)
    return b"".join(chunks)


def _write_durable(path: Path, data: bytes) -> None:
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
