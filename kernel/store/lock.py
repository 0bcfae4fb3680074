"""The single-writer session lock: fcntl.flock on SESSION/lock, never waited on."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType

from kernel.errors import SessionLocked


class SessionLock:
    """Exclusive, non-blocking lock naming its holder's pid; a dead holder's lock is free."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> SessionLock:
        """Take the lock now or raise SessionLocked naming the holder's pid."""
        if self._fd is not None:
            return self
        # O_CLOEXEC: worker subprocesses must not inherit (and so outlive us holding) the lock.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Free the lock; idempotent. The kernel dying frees it too (flock)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
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
