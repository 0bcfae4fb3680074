"""The `.new-ID` directories a session is built in before its rename (issue 32, item 7).

`Session.create` builds a session under `SESSIONS/.new-ID` and renames it into place, so that
a crash never shows a half session. A create that fails removes its staging dir
(`discard_staging`), also when no descriptor can be had (EMFILE: shutil.rmtree needs one per
level, so the known entries are then removed by name). A create that was killed leaves its dir
behind; the next create removes it (`sweep_staging`).

Whose staging dir is it? Its creator takes `lock` in it (flock, as for any session) right
after the mkdir and holds it until the rename. So a staging dir is abandoned when its `lock`
can be taken, or is missing, *and* nothing in it changed for `GRACE_S` (a live creator is past
its flock within microseconds of its mkdir; the grace covers that gap, and the sweeper holds
the lock while it removes, so a creator woken in that gap fails cleanly instead of building in
a dir being removed). A staging dir whose lock is held is never touched, whatever its age.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from pathlib import Path

__all__ = ["GRACE_S", "STAGING", "discard_staging", "sweep_staging"]

STAGING = ".new-"
GRACE_S = 60.0
# What a staging dir can hold (Session.create): removed by name when no descriptor is left.
_FILES = ("lock", "events.jsonl", "events.index")
_DIRS = ("artifacts", "terminal")
_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def discard_staging(staging: Path) -> None:
    """Remove a staging dir, best effort, never raising (nor replacing the error that made
    its create fail: under EMFILE even an import fails)."""
    for name in _FILES:  # by name first: unlink and rmdir take no descriptor
        with contextlib.suppress(OSError):
            os.unlink(staging / name)
    for name in _DIRS:
        with contextlib.suppress(OSError):
            os.rmdir(staging / name)
    with contextlib.suppress(OSError):
        os.rmdir(staging)
    if os.path.lexists(staging):  # something else in it (an artifact, a temp file)
        with contextlib.suppress(Exception):
            import shutil  # only now: its import (bz2, lzma) slows a warm start

            shutil.rmtree(staging, ignore_errors=True)


def sweep_staging(home: Path, now: float | None = None) -> list[str]:
    """Remove the staging dirs in `home` that no live create owns (see the module docstring);
    their names. Never raises: a dir that cannot be judged or removed is left."""
    now = time.time() if now is None else now
    swept: list[str] = []
    try:
        with os.scandir(home) as entries:
            found = [e.name for e in entries if e.name.startswith(STAGING)]
    except OSError:
        return swept
    for name in found:
        with contextlib.suppress(OSError):
            if _sweep_one(home / name, now):
                swept.append(name)
    return swept


def _sweep_one(staging: Path, now: float) -> bool:
    info = os.lstat(staging)
    if not stat.S_ISDIR(info.st_mode):
        return False  # a link or a file: not a staging dir of ours
    try:
        fd: int | None = os.open(staging / "lock", _FLAGS)
    except FileNotFoundError:
        fd = None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a live create holds it
        newest = max([info.st_mtime, *(_mtime(staging / n) for n in (*_FILES, *_DIRS))])
        if now - newest < GRACE_S:
            return False  # perhaps a create between its mkdir and its flock
        discard_staging(staging)
        return not os.path.lexists(staging)
    finally:
        if fd is not None:
            os.close(fd)


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0
