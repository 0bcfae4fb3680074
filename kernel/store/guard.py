"""The session directory's own files: no links followed, environment errors named.

jmp writes only regular files and directories it made itself inside a session directory. A
symbolic link or a special file (a FIFO, a socket, a device) among them was planted, most
likely through the shell the model drives: following it would let jmp write outside the
session (`artifacts -> /etc`), empty a file (`lock -> ~/.bashrc`) or hang (`events.jsonl` a
FIFO). Such a directory is refused before anything is written (issue 9, item 8).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from kernel.errors import SessionRefused, StorageError
from kernel.store.modes import FILE_MODE

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
# Entries that must be regular files when present (prefix match for the numbered ones).
FILES = ("events.jsonl", "lock", "memory.sqlite3", "context-", "events.jsonl.torn-")
DIRS = ("artifacts", "terminal")


def storage_error(operation: str, path: str | os.PathLike[str], exc: OSError) -> StorageError:
    """An OSError as a StorageError that says what failed and where (never 'internal error')."""
    code = errno.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or str(exc)
    return StorageError(
        f"cannot {operation} {os.fspath(path)}: {reason}" + (f" ({code})" if code else "")
    )


def check_session_dir(directory: Path) -> None:
    """Refuse (SessionRefused) a session directory that is a link or holds links or special
    files where jmp keeps its files; artifacts/ and terminal/ are checked one level down.

    The sessions home itself may be a link (the user chose it); the session directory may not.
    """
    try:
        _check_dir(directory)
        with os.scandir(directory) as entries:
            found = list(entries)
        for entry in found:
            _check_entry(directory, entry)
            if entry.name in DIRS:
                with os.scandir(entry.path) as inner:
                    for sub in inner:
                        if sub.is_symlink() or not (
                            sub.is_file(follow_symlinks=False) or sub.is_dir(follow_symlinks=False)
                        ):
                            _refuse(directory, f"{entry.name}/{sub.name}", _what(sub.path))
    except OSError as exc:
        raise storage_error("read the session directory", directory, exc) from None


def _check_entry(directory: Path, entry: os.DirEntry[str]) -> None:
    if entry.is_symlink():
        _refuse(directory, entry.name, _what(entry.path))
    if entry.name in DIRS:
        if not entry.is_dir(follow_symlinks=False):
            _refuse(directory, entry.name, _what(entry.path))
    elif entry.name.startswith(FILES) and not entry.is_file(follow_symlinks=False):
        _refuse(directory, entry.name, _what(entry.path))


def _check_dir(path: Path) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise SessionRefused(
            f"the session directory {path} is {_what(str(path))}; jmp never follows a link "
            "for a session inside the sessions directory (nothing was written)"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise SessionRefused(f"the session directory {path} is {_what(str(path))}")


def _refuse(directory: Path, name: str, what: str) -> None:
    raise SessionRefused(
        f"session {directory.name} refused: {name} is {what}, not a file jmp wrote; jmp never "
        f"follows links or opens special files inside a session directory ({directory}). "
        "Nothing was written: remove or fix that entry"
    )


def _what(path: str) -> str:
    """'a symbolic link to X', 'a FIFO', ... for messages."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "unreadable"
    if stat.S_ISLNK(mode):
        try:
            return f"a symbolic link to {os.readlink(path)}"
        except OSError:
            return "a symbolic link"
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "a special file"


def open_nofollow(path: Path, flags: int, mode: int = FILE_MODE) -> int:
    """os.open that never follows a link in the last component; a link is SessionRefused.
    A file it creates is the owner's alone (kernel/store/modes.py)."""
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse(path.parent, path.name, _what(str(path)))
        raise


def read_nofollow(path: Path) -> bytes:
    """The bytes of a regular file, without following a link or blocking on a FIFO."""
    fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            _refuse(path.parent, path.name, _what(str(path)))
        # One read of the whole file, not joined copies (a 22 MB checkpoint at 1M records);
        # read on to the end if it was short or the file grew.
        chunks = [os.read(fd, info.st_size + 1)]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)
