"""events.jsonl: strict reading with torn-tail recovery, appends of whole lines, and fsync."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from pathlib import Path

from kernel.errors import CorruptLog, LogReplaced, StorageError, UnsupportedLogVersion
from kernel.store.durable import fsync_dir, write_all
from kernel.store.guard import open_nofollow, storage_error
from protocol.codec import MalformedRecord, UnsupportedVersion, decode_event, encode_event
from protocol.events import Event


def parse_log(buf: bytes, name: str = "events.jsonl") -> tuple[list[Event], int]:
    """Decode every complete line; return the events and the byte length they span.

    Bytes after the last newline are a torn tail and are not decoded. Any complete line that is
    malformed, of another version or out of sequence raises CorruptLog naming its line number.
    """
    end = buf.rfind(b"\n") + 1
    events: list[Event] = []
    start = 0
    number = 0
    while start < end:
        stop = buf.index(b"\n", start)
        number += 1
        events.append(_decode_line(buf[start:stop], number, name))
        start = stop + 1
        _check_seq(events, number, name)
    return events, end


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


def _check_seq(events: list[Event], number: int, name: str) -> None:
    if len(events) < 2:
        return
    prev, seq = events[-2].seq, events[-1].seq
    if prev is not None and seq != prev + 1:
        raise CorruptLog(
            f"{name} line {number}: seq {seq} does not follow {prev}; nothing was written"
        )


def check_session(events: list[Event], session_id: str, name: str = "events.jsonl") -> None:
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


def record_digest(events: list[Event], seq: int) -> str:
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

    def create(self, first: Event) -> None:
        """Create the log (it must not exist) holding `first`, fsynced."""
        self._open_for_append(os.O_EXCL)
        self.append(first, durable=True)

    def _open_for_append(self, extra: int = 0) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | extra
        try:
            self._fd = open_nofollow(self.path, flags)
        except OSError as exc:
            raise storage_error("open the event log", self.path, exc) from None

    def load(self, session_id: str | None = None, writable: bool = True) -> list[Event]:
        """Read all events; a torn tail is archived beside the log and cut (see `torn`).

        A corrupt complete line (or, given session_id, a log that is not that session's)
        raises CorruptLog and leaves the file byte-for-byte unchanged. With writable False
        (read-only storage) nothing is changed: a torn tail is only left out.
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
                raise CorruptLog(f"{self.path} is not a regular file; nothing was written")
            buf = _read_all(fd)
        except OSError as exc:
            raise storage_error("read the event log", self.path, exc) from None
        events, end = parse_log(buf, self.path.name)
        self._synced = end  # as far as anyone can know: what a later failed fsync cuts back to
        if session_id is not None:
            check_session(events, session_id, self.path.name)
        if end < len(buf) and writable:
            self.torn = self._cut_tail(buf[end:], end)
        return events

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
            raise storage_error(f"append the {kind} record to", self.path, exc) from None

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
            raise StorageError(
                str(storage_error("fsync", self.path, exc)) + "; " + self._cut_back()
            ) from None
        self._synced = size

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
        """Close the append handle; idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


_STOPPED = (
    "the run stopped rather than write into a file nobody reads (a tool or a shell command "
    "changed jmp's own log); nothing more was written"
)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_durable(path: Path, data: bytes) -> None:
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
