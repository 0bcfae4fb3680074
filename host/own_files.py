"""Opening a file jmp keeps in a directory of its own: never through a planted name.

The warm pool's runtime dir holds `pool.lock`, `pool.log` and `pool.pid`; any process of the
same user can put a symbolic link, a FIFO or a hard link there first. Following it would let
the pool truncate or overwrite a file elsewhere (`pool.log -> ~/.bashrc`, opened O_TRUNC),
create one (`pool.lock -> /some/new/file`) or hang on a FIFO. Kernel and workers both open
these files, so the one rule lives here.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

__all__ = ["PlantedFile", "open_own", "write_own"]


class PlantedFile(OSError):
    """The name is a link, a special file, a hard link or another user's file: not ours."""


def open_own(
    path: str | os.PathLike[str], flags: int, mode: int = 0o600, *, dir_fd: int | None = None
) -> int:
    """os.open for a regular file of our own, created if `flags` say so; PlantedFile else.
    `dir_fd`: `path` is relative to that directory (os.open's meaning).

    The last component is never followed (O_NOFOLLOW), the open never blocks (a FIFO is
    opened non-blocking, then refused), and a file that is not regular, has another name
    (st_nlink > 1) or another owner is refused before anything is written. O_TRUNC is applied
    only after those checks. The descriptor is close-on-exec and blocking.
    """
    truncate = flags & os.O_TRUNC
    flags = (flags & ~os.O_TRUNC) | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PlantedFile(errno.ELOOP, "a symbolic link, never followed", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        problem = (
            "not a regular file"
            if not stat.S_ISREG(info.st_mode)
            else "a file with another name too (a hard link)"
            if info.st_nlink != 1
            else f"owned by uid {info.st_uid}"
            if info.st_uid != os.geteuid()
            else ""
        )
        if problem:
            raise PlantedFile(errno.EPERM, problem, str(path))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_own(path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> None:
    """Replace the contents of our own file `path` with `data` (see open_own)."""
    fd = open_own(Path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
