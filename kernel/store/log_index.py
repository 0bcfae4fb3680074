"""events.index: the log's verified prefixes, so that opening a session reads only its ends.

Beside events.jsonl, written only by the holder of the session lock. A header (magic, format,
stride, session id) and then one fixed-size entry per `stride` records: entry k says that
records 1 to (k+1)*stride end at byte `offset` of the log, that the bytes of chunk k (its
`stride` lines) chain to `digest` (BLAKE2b-128 of entry k-1's digest and chunk k's bytes), and
its state: whether every tool call among records 1..seq has its outcome (`settled`:
kernel/store/pending.py would find none unsettled in them) and, when not, the seqs of the few
records that rebuild the calls still open (`resume`, pending.Settling.resume), so that open
resumes at any entry whatever the calls straddle; and which kinds of record the chunk holds
(`kinds`, so that a reader after rare kinds skips the chunks without them). A seal (BLAKE2b-64
of the digest and the state) and a CRC-32 of each entry and of the header tell damage to this
file apart from a change to the log.

Derived and disposable, never trusted over the log: an entry is written only once an fsync of
the log covered its bytes, and is fsynced itself; a missing, foreign or other-format file
(format 1 had no settled mark, format 2 no resume point) is rebuilt from the log by a full
check, a damaged entry (CRC, place or seal) is dropped with everything after it. A chunk whose
bytes no longer chain to their digest is a changed log (CorruptLog), not a stale index: nothing
legitimate rewrites a line once it is written. See docs/DECISIONS.md for what a forger who
rewrites the index consistently could hide, and `--verify`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from kernel.store.durable import write_all, write_atomic
from kernel.store.guard import NOFOLLOW

NAME = "events.index"
MAGIC = b"JMPLOGIX"
FORMAT = 3  # 1: no settled mark; 2: a settled mark only (both are rebuilt once)
# Records per entry: open hashes two or three chunks of this many lines and parses the rest.
# JMP_LOG_INDEX_STRIDE sets it small so that a short session has entries (a kill or power
# campaign could then cut on index writes; the chaos runner does not set it today).
_STRIDE_ENV = os.environ.get("JMP_LOG_INDEX_STRIDE", "")
STRIDE = int(_STRIDE_ENV) if _STRIDE_ENV.isdigit() and int(_STRIDE_ENV) > 0 else 1024
# The records that rebuild the calls open across an entry (pending.Settling.resume): at most
# this many seqs; more (several calls left open at once) and the entry keeps only the oldest,
# and open reads from it (`overflow`).
RESUME = 12
# The kinds a chunk summary names (bit k: the chunk holds a record of KINDS[k]); any other kind
# sets OTHER. Adding a kind here is a new FORMAT.
KINDS = (
    "session", "user", "run_started", "route", "task", "parameter", "receipt",
    "completion_review", "model_started", "model_progress", "usage", "argument_offload",
    "approval", "mode", "tool_started", "tool_finished", "tool_uncertain", "compaction",
    "final", "error", "cleanup_warning",
)  # fmt: skip
OTHER = 1 << 31
_BIT = {kind: 1 << k for k, kind in enumerate(KINDS)}
_HEADER = struct.Struct("<8sII32s")  # magic, format, stride, session id (ASCII hex)
# seq, offset, digest, flags (bit 0: settled, bit 1: overflow), kinds, resume seqs, seal
_ENTRY = struct.Struct(f"<QQ16sII{RESUME}Q8s")
_STATE = struct.Struct(f"<II{RESUME}Q")  # what the seal covers, after the digest
_CRC = struct.Struct("<I")
_RECORD = struct.Struct(_ENTRY.format + "I")  # an entry and its CRC
HEADER_SIZE = _HEADER.size + _CRC.size
ENTRY_SIZE = _ENTRY.size + _CRC.size


def kind_bits(kinds: Iterable[str]) -> int:
    """The summary bits of these kinds (OTHER for one KINDS does not name)."""
    bits = 0
    for kind in kinds:
        bits |= _BIT.get(kind, OTHER)
    return bits


class Entry(NamedTuple):
    """Records 1..seq end at byte `offset`; the last chunk of them chains to `digest`; with
    `settled`, every call started in records 1..seq has its outcome (pending.Settling);
    otherwise `resume` are the seqs of the records that rebuild the calls still open (with
    `overflow`: only the oldest of them, the rest follow it). `kinds`: the chunk's summary."""

    seq: int
    offset: int
    digest: bytes
    settled: bool = False
    resume: tuple[int, ...] = ()
    overflow: bool = False
    kinds: int = 0

    def seal(self) -> bytes:
        """The check of this entry's state (mark, resume point, summary) against its digest:
        a state changed without it is a damaged index, not a changed log."""
        flags = int(self.settled) | int(self.overflow) << 1
        resume = (*self.resume, *(0,) * (RESUME - len(self.resume)))
        state = _STATE.pack(flags, self.kinds, *resume)
        return hashlib.blake2b(self.digest + state, digest_size=8).digest()


START = Entry(0, 0, b"", True)  # before record 1: nothing started, nothing unsettled


def mark(seq: int, offset: int, digest: bytes, resume: Sequence[int], kinds: int) -> Entry:
    """The entry that ends at `seq`, its calls' state from pending.Settling.resume (empty:
    settled)."""
    if len(resume) > RESUME:
        return Entry(seq, offset, digest, False, (resume[0],), True, kinds)
    return Entry(seq, offset, digest, not resume, tuple(resume), False, kinds)


def chain(previous: bytes, data: bytes | memoryview) -> bytes:
    """The digest of a chunk's bytes, after the chunk digested `previous`."""
    hasher = hashlib.blake2b(previous, digest_size=16)
    hasher.update(data)
    return hasher.digest()


class Chainer:
    """The running digest of the chunk being appended (fed line by line)."""

    def __init__(self, previous: bytes = b"") -> None:
        self._hasher = hashlib.blake2b(previous, digest_size=16)

    def update(self, line: bytes | memoryview) -> None:
        self._hasher.update(line)

    def close(self) -> bytes:
        """This chunk's digest; the chainer then starts the next chunk from it."""
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
    for k, (seq, offset, digest, flags, kinds, *rest) in enumerate(_RECORD.iter_unpack(body)):
        start = k * ENTRY_SIZE
        seal, crc = rest[RESUME], rest[RESUME + 1]
        if crc32(body[start : start + _ENTRY.size]) != crc:
            return stride, entries, True
        resume = tuple(s for s in rest[:RESUME] if s)
        misplaced = seq != previous.seq + stride or offset <= previous.offset
        wrong = (
            flags not in (0, 1, 2)
            or (flags == 1) == bool(resume)
            or resume != tuple(sorted(set(resume)))
        )
        if misplaced or wrong or (resume and resume[-1] > seq):
            return stride, entries, True  # misplaced: this file is damaged from here
        previous = Entry(seq, offset, digest, flags == 1, resume, flags == 2, kinds)
        if previous.seal() != seal:
            return stride, entries, True  # a state changed without its seal: damaged here
        entries.append(previous)
    return stride, entries, len(raw) - HEADER_SIZE != whole


def older_format(directory: Path, session_id: str) -> int | None:
    """The format of this session's index when it is an older one (rebuilt at this open)."""
    try:
        fd = os.open(directory / NAME, os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        raw = os.pread(fd, HEADER_SIZE, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    header = _unpack(_HEADER, raw) if len(raw) == HEADER_SIZE else None
    if header is None or header[0] != MAGIC or header[3] != session_id.encode():
        return None
    old = int(header[1])  # type: ignore[call-overload]
    return old if 0 < old < FORMAT else None


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
    flags = int(entry.settled) | int(entry.overflow) << 1
    resume = (*entry.resume, *(0,) * (RESUME - len(entry.resume)))
    fields = (entry.seq, entry.offset, entry.digest, flags, entry.kinds, *resume, entry.seal())
    return _pack(_ENTRY, *fields)
