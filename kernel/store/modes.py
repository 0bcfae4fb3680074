"""Who may read a session: its owner alone (issue 32, item 2).

A session holds the person's prompts, the model's answers and every tool's output (the log,
the recall index, artifacts), and its `lock` decides who may write it. Other local users get
none of it: the sessions home and every session directory are created 0700 and every file
0600 (`DIR_MODE`, `FILE_MODE`), whatever the umask (a umask only takes bits away, so these
modes come out exact under 0 and under 022; SQLite gives its -wal, -shm and -journal files
the mode of the database file, created here first). The lock is opened O_RDWR and made 0600:
`flock` needs only a descriptor, a read-only one will do, and no other user can get one
(kernel/store/lock.py).

A session written before (0755 directories, 0644 files) is tightened when it is opened
(`tighten`): every directory and regular file under it with a group or other bit loses those
bits, never following a link, and `Session.open` says once on stderr what it changed. The
session directory's own mode is the gate for artifacts/ (only a wide session directory has
its artifacts walked: jmp wrote every artifact 0600 already, and open must not cost a stat
per artifact); the rest (a few files; terminal/, the shell's launcher and sourced commands)
is always walked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "make_dir", "tighten"]

DIR_MODE = 0o700
FILE_MODE = 0o600
OTHERS = 0o077  # the group and other bits: none may be set on a session's entries
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def make_dir(path: Path) -> None:
    """mkdir 0700 (FileExistsError as os.mkdir; the parent must exist)."""
    os.mkdir(path, DIR_MODE)


def tighten(directory: Path, *, gated: tuple[str, ...] = ("artifacts",)) -> list[str]:
    """Take the group and other bits off `directory` and everything under it; the changes
    made, as `name 0755 -> 0700` (relative names, `.` for the directory itself).

    Links are never followed (os.fwalk holds each directory open; a file is opened
    O_NOFOLLOW and changed through its descriptor); what is neither a regular file nor a
    directory is left alone (kernel/store/guard.py refuses those). A subdirectory named in
    `gated` is walked only when `directory` itself was wide. A file that cannot be opened
    (gone meanwhile, a link) is skipped; a refused change (EROFS, EPERM) raises OSError.
    """
    changed: list[str] = []
    wide = bool(os.lstat(directory).st_mode & OTHERS)
    for root, dirs, files, rootfd in os.fwalk(directory):
        rel = os.path.relpath(root, directory)
        if rel == "." and not wide:
            dirs[:] = [d for d in dirs if d not in gated]
        _fix(rootfd, rel, changed)
        for name in files:
            try:  # no special file is ever opened (a device's open may act)
                if not stat.S_ISREG(os.stat(name, dir_fd=rootfd, follow_symlinks=False).st_mode):
                    continue
                fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=rootfd)
            except OSError:  # gone, a link (ELOOP), unreadable even to us: not ours to change
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    _fix(fd, os.path.normpath(os.path.join(rel, name)), changed)
            finally:
                os.close(fd)
    return changed


def _fix(fd: int, name: str, changed: list[str]) -> None:
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & OTHERS:
        os.fchmod(fd, mode & ~OTHERS)
        changed.append(f"{name} {mode:04o} -> {mode & ~OTHERS:04o}")
