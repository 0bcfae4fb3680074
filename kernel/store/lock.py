"""The single-writer session lock: fcntl.flock on SESSION/lock, never waited on."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

from kernel.errors import SessionLocked
from kernel.store.guard import open_nofollow, storage_error
from kernel.store.modes import FILE_MODE

# The storage refuses writes: the lock cannot be created or written (a read-only replay).
READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class SessionLock:
    """Exclusive, non-blocking lock naming its holder's pid; a dead holder's lock is free."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self.read_only = False  # taken on read-only storage: nothing may be written

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, allow_read_only: bool = False) -> SessionLock:
        """Take the lock now or raise SessionLocked naming the holder's pid.

        With allow_read_only, storage that refuses writes (EROFS, EACCES) gives a read-only
        hold instead of an error: the existing lock file opened for reading (so a live writer
        is still refused), or no file at all when none exists; `read_only` is then True.
        """
        if self._fd is not None:
            return self
        # O_CLOEXEC: worker subprocesses must not inherit (and so outlive us holding) the lock.
        # O_RDWR and 0600: flock needs only a descriptor, and one that can read is enough, so
        # no other user may open the file at all (kernel/store/modes.py).
        try:
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            if not (allow_read_only and exc.errno in READ_ONLY_ERRNOS):
                raise storage_error("create the session lock", self.path, exc) from None
            fd = self._open_read_only()
        try:
            # Read-only holders share: replays may run side by side, never beside a writer.
            fcntl.flock(fd, (fcntl.LOCK_SH if self.read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise SessionLocked(
                f"session {self.path.parent.name} is in use by {who}; "
                "one writer at a time (wait for it to finish or stop it)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        if not self.read_only:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            except OSError as exc:
                os.close(fd)
                raise storage_error("write the session lock", self.path, exc) from None
        self._fd = fd
        return self

    def _open_read_only(self) -> int:
        self.read_only = True
        try:
            return open_nofollow(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            # Nothing can be written here, by us or (same storage) by another writer.
            return open_nofollow(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise storage_error("open the session lock", self.path, exc) from None

    def release(self) -> None:
        """Free the lock; idempotent. The kernel dying frees it too (flock)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if not self.read_only:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # so nobody reads a stale holder pid
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None  # the holder is between truncate and write
