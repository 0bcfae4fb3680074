"""events.index: the log's verified prefixes, so that opening a session reads only its ends.

Beside events.jsonl, written only by the holder of the session lock. A header (magic, format,
stride, session id) and then one fixed-size entry per `stride` records: entry k says that
records 1 to (k+1)*stride end at byte `offset` of the log, whether every tool call among them
has its outcome (`settled`: kernel/store/pending.py would find none unsettled in them), and
that the bytes of chunk k (its `stride` lines) chain to `digest` (BLAKE2b-128 of entry k-1's
digest, chunk k's bytes and the settled byte). Header and entries each carry a CRC-32 of
themselves, so damage to this file is told apart from a change to the log.

Derived and disposable, never trusted over the log: an entry is written only once an fsync of
the log covered its bytes, and is fsynced itself; a missing, foreign or other-format file
(format 1 had no settled mark) is rebuilt from the log by a full check, a damaged entry is
dropped with everything after it. A chunk whose bytes no longer chain to their digest is a
changed log (CorruptLog), not a stale index: nothing legitimate rewrites a line once it is
written. A settled mark changed without its digest is a damaged index (rebuilt); see
docs/DECISIONS.md for what a forger who rewrites the chain could hide, and `--verify`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

from kernel.store.durable import write_all, write_atomic
from kernel.store.guard import NOFOLLOW

NAME = "events.index"
MAGIC = b"JMPLOGIX"
FORMAT = 2  # 1: no settled mark (such a file is rebuilt)
# Records per entry: open hashes two or three chunks of this many lines and parses the rest.
# JMP_LOG_INDEX_STRIDE sets it small so that a short session has entries (a kill or power
# campaign could then cut on index writes; the chaos runner does not set it today).
_STRIDE_ENV = os.environ.get("JMP_LOG_INDEX_STRIDE", "")
STRIDE = int(_STRIDE_ENV) if _STRIDE_ENV.isdigit() and int(_STRIDE_ENV) > 0 else 1024
_HEADER = struct.Struct("<8sII32s")  # magic, format, stride, session id (ASCII hex)
_ENTRY = struct.Struct("<QQ16sI")  # seq, offset, digest, flags (bit 0: settled)
_CRC = struct.Struct("<I")
_RECORD = struct.Struct(_ENTRY.format + "I")  # an entry and its CRC
HEADER_SIZE = _HEADER.size + _CRC.size
ENTRY_SIZE = _ENTRY.size + _CRC.size


class Entry(NamedTuple):
    """Records 1..seq end at byte `offset`; the last chunk of them chains to `digest`; with
    `settled`, every call started in records 1..seq has its outcome (pending.Settling)."""

    seq: int
    offset: int
    digest: bytes
    settled: bool = False


START = Entry(0, 0, b"", True)  # before record 1: nothing started, nothing unsettled


def chain(previous: bytes, data: bytes | memoryview, settled: bool) -> bytes:
    """The digest of a chunk's bytes and settled mark, after the chunk digested `previous`."""
    hasher = hashlib.blake2b(previous, digest_size=16)
    hasher.update(data)
    hasher.update(_SETTLED[settled])
    return hasher.digest()


_SETTLED = {False: b"\0", True: b"\1"}


class Chainer:
    """The running digest of the chunk being appended (fed line by line)."""

    def __init__(self, previous: bytes = b"") -> None:
        self._hasher = hashlib.blake2b(previous, digest_size=16)

    def update(self, line: bytes | memoryview) -> None:
        self._hasher.update(line)

    def close(self, settled: bool) -> bytes:
        """This chunk's digest; the chainer then starts the next chunk from it."""
        self._hasher.update(_SETTLED[settled])
        digest = self._hasher.digest()
        self._hasher = hashlib.blake2b(digest, digest_size=16)
        return digest


def _pack(fmt: struct.Struct, *fields: object) -> bytes:
    body = fmt.pack(*fields)
    return body + _CRC.pack(zlib.crc32(body))


def _unpack(fmt: struct.Struct, raw: bytes) -> tuple[object, ...] | None:
    body, (crc,) = raw[: fmt.size], _CRC.unpack(raw[fmt.size :])
    return fmt.unpack(body) if zlib.crc32(body) == crc else None


def read(directory: Path, session_id: str) -> tuple[int, list[Entry], bool] | None:
    """(stride, the good entries, whether a damaged or torn part follows them); None when the
    file is missing, unreadable, a link, or not this session's index of this format."""
    try:
        fd = os.open(directory / NAME, os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        raw = os.pread(fd, size, 0) if size <= (1 << 28) else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    header = _unpack(_HEADER, raw[:HEADER_SIZE]) if len(raw) >= HEADER_SIZE else None
    if header is None or header[:2] != (MAGIC, FORMAT) or header[3] != session_id.encode():
        return None
    stride = int(header[2])  # type: ignore[call-overload]
    if stride <= 0:
        return None
    entries: list[Entry] = []
    whole = (len(raw) - HEADER_SIZE) // ENTRY_SIZE * ENTRY_SIZE
    body = memoryview(raw)[HEADER_SIZE : HEADER_SIZE + whole]
    crc32, previous = zlib.crc32, START
    # One pass in C over the fixed-size records (an open at 1M records reads about 1,000).
    for k, (seq, offset, digest, flags, crc) in enumerate(_RECORD.iter_unpack(body)):
        start = k * ENTRY_SIZE
        if crc32(body[start : start + _ENTRY.size]) != crc:
            return stride, entries, True
        misplaced = seq != previous.seq + stride or offset <= previous.offset
        if misplaced or flags not in (0, 1):
            return stride, entries, True  # misplaced: this file is damaged from here
        previous = Entry(seq, offset, digest, flags == 1)
        entries.append(previous)
    return stride, entries, len(raw) - HEADER_SIZE != whole


class IndexWriter:
    """Appends entries to events.index (fsynced); creates or replaces it atomically when it
    is missing or damaged. A failure disables it for the session: the index is only a cache,
    and the next open rebuilds it."""

    def __init__(self, directory: Path, session_id: str, stride: int, kept: int | None) -> None:
        """`kept`: how many entries of the file on disk are good (None: write it afresh)."""
        self.directory = directory
        self.session_id = session_id
        self.stride = stride
        self._kept = kept
        self.failed = False

    def write(self, entries: list[Entry]) -> None:
        """Make `entries` the file's content: append what it lacks, or write it afresh."""
        kept = self._kept
        if self.failed or not entries or (kept is not None and kept >= len(entries)):
            return
        try:
            if kept is None:
                self._replace(entries)
            else:
                self._append(entries[kept:], kept)
            self._kept = len(entries)
        except OSError:
            self.failed = True  # the log stays the truth: the next open rebuilds from it
            with contextlib.suppress(OSError):
                os.unlink(self.directory / NAME)

    def _replace(self, entries: list[Entry]) -> None:
        header = _pack(_HEADER, MAGIC, FORMAT, self.stride, self.session_id.encode())
        body = b"".join(_pack_entry(e) for e in entries)
        write_atomic(self.directory, NAME, header + body)

    def _append(self, entries: list[Entry], kept: int) -> None:
        fd = os.open(self.directory / NAME, os.O_WRONLY | NOFOLLOW)
        try:
            os.ftruncate(fd, HEADER_SIZE + kept * ENTRY_SIZE)  # a torn or damaged end goes
            os.lseek(fd, 0, os.SEEK_END)
            write_all(fd, b"".join(_pack_entry(e) for e in entries))
            os.fsync(fd)
        finally:
            os.close(fd)


def _pack_entry(entry: Entry) -> bytes:
    return _pack(_ENTRY, entry.seq, entry.offset, entry.digest, int(entry.settled))


def watermark(entries: list[Entry]) -> int:
    """The position of the last settled entry (-1: none is)."""
    for k in range(len(entries) - 1, -1, -1):
        if entries[k].settled:
            return k
    return -1
