"""The kernel's one way to put bytes on disk: whole writes, atomic replaces, durable entries.

A file written with `write_at` / `write_atomic` is seen whole or not at all, after a crash too
(temp file, fsync, rename); `write_atomic` and `fsync_dir` also make the directory entry
survive a power cut. `write_renamed` leaves both fsyncs to its caller (artifacts: the group
commit does them, in parallel, before any record naming the file is written). Nothing here
follows a link in the last component. (The harness worker, which may not import the kernel,
has its own twin: jev_harness/report.py.)
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def write_all(fd: int, data: bytes) -> None:
    """write() until every byte is taken (a regular file takes it in one call)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: Path) -> None:
    """Make a directory entry (a create or rename inside it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_at(dfd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `name` in the directory open as `dfd` with `data`, atomically: a temp file,
    fsynced, renamed over it (the directory is the caller's to fsync). A planted link at
    `name` is replaced, never followed; on any failure the temp file is removed and `name`
    is unchanged."""
    os.close(_replace(dfd, name, data, mode, sync_first=True))


def write_renamed(dfd: int, name: str, data: bytes, *, mode: int = 0o600) -> int:
    """`write_at` without its fsync: renamed at once, the open descriptor returned for the
    caller to fsync, with the directory, before anything that names it is written (the
    group commit does: kernel/store/commit.py). A power cut before then may leave the name
    with fewer bytes, never a name that a durable record points at."""
    return _replace(dfd, name, data, mode, sync_first=False)


def _replace(dfd: int, name: str, data: bytes, mode: int, *, sync_first: bool) -> int:
    tmp = f".tmp-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode, dir_fd=dfd)
    try:
        write_all(fd, data)
        if sync_first:
            os.fsync(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    return fd


def write_atomic(directory: Path, name: str, data: bytes, mode: int = 0o600) -> None:
    """`write_at` into `directory`, durable: the bytes and the rename both survive a crash."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
    try:
        write_at(dfd, name, data, mode=mode)
        os.fsync(dfd)  # the rename itself must survive a crash
    finally:
        os.close(dfd)
