"""A torn last line of events.jsonl, moved out of the log so that every archive has its record.

Recovery archives the bytes first, durably, as `<archive>.pending`, cuts the log back (fsync),
and the session appends the `error` record that reports it (durable) before `finish` names the
archive. A power cut between those steps leaves the pending archive; the next open finishes
the job (the same torn bytes reuse it; it is reported unless a record already is; then named).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from kernel.errors import SessionRefused
from kernel.store.durable import fsync_dir, write_all
from kernel.store.guard import open_nofollow, read_nofollow, storage_error
from protocol.events import Event

PENDING = ".pending"  # a torn-tail archive whose error record is not durable yet


class TornTail:
    """An incomplete last line that load() moved out of the log.

    It is archived first, durably, as `<archive>.pending`, then cut from the log; the session
    appends the `error` record that reports it (durable) and then `finish`es it: the archive
    takes its name. A power cut between those steps leaves the pending archive, and the next
    open finishes the job: it reuses the archive for the same torn bytes, reports it when no
    record does yet, and names it. So every archive has its error record."""

    def __init__(self, archive: Path, size: int) -> None:
        self.archive = archive
        self.size = size

    @property
    def pending(self) -> Path:
        return self.archive.with_name(self.archive.name + PENDING)

    def describe(self) -> str:
        return (
            f"the last line of events.jsonl was incomplete ({self.size} bytes, a write cut "
            f"short); it was moved to {self.archive.name} and removed from the log"
        )

    def reported_by(self, events: Sequence[Event]) -> bool:
        """Whether one of the last records is already its error (a cut came before `finish`:
        nothing is appended between the error and the rename)."""
        return any(
            event.kind == "error"
            and getattr(event.data, "error_class", "") == "TornRecord"
            and self.archive.name in getattr(event.data, "message", "")
            for event in events
        )

    def finish(self) -> None:
        """Give the archive its name, durably: its error record is on the disk."""
        try:
            os.rename(self.pending, self.archive)
            fsync_dir(self.archive.parent)
        except OSError as exc:
            raise storage_error("name the torn-tail archive of", self.archive, exc) from None


def recover_torn_tail(log: Path, fd: int, tail: bytes, end: int) -> list[TornTail]:
    """Archive the torn `tail` (if any) of the log open as `fd` and cut it back to `end`;
    with the archives an earlier open left pending, what is still to be reported."""
    left = pending_archives(log)
    if not tail:
        return left
    same = [t for t in left if t.size == len(tail) and _read_regular(t.pending) == tail]
    if same:  # cut before the log's cut-back was durable: that archive holds these bytes
        torn = same[0]
    else:  # archive first and durably, so the torn bytes exist somewhere at every instant
        stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
        torn = TornTail(log.with_name(f"{log.name}.torn-{stamp}"), len(tail))
        left.append(torn)
    try:
        if not same:
            _write_durable(torn.pending, tail)
        os.ftruncate(fd, end)
        os.fsync(fd)
    except OSError as exc:
        raise storage_error("archive the torn last line of", log, exc) from None
    return left


def pending_archives(log: Path) -> list[TornTail]:
    """The torn-tail archives an interrupted open left without their error record."""
    prefix = f"{log.name}.torn-"
    try:
        with os.scandir(log.parent) as entries:
            names = sorted(
                e.name
                for e in entries
                if e.name.startswith(prefix)
                and e.name.endswith(PENDING)
                and e.is_file(follow_symlinks=False)
            )
    except OSError as exc:
        raise storage_error("list the directory of", log, exc) from None
    found = []
    for name in names:
        size = (log.parent / name).lstat().st_size
        found.append(TornTail(log.with_name(name[: -len(PENDING)]), size))
    return found


def _read_regular(path: Path) -> bytes | None:
    try:
        return read_nofollow(path)
    except (OSError, SessionRefused):
        return None


def _write_durable(path: Path, data: bytes) -> None:
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
