"""Confined file access under one root: descriptor-relative opens, O_NOFOLLOW on every component.

Paths are tuples of raw name components (bytes) relative to the root. A component that is
empty, `.`, `..` or holds `/` or NUL is refused; so are absolute paths. Every component is
looked at with `fstatat(..., AT_SYMLINK_NOFOLLOW)` before it is opened, and opened with
`O_NOFOLLOW | O_NONBLOCK`, then checked again with `fstat` on the descriptor: a symlink, a FIFO,
a device or a socket is never followed or read, and nothing blocks. A regular file with more
than one name (a hard link: its other names may lie outside the root, and nothing tells where)
is read, but its link count travels with it so that every listing and read can mark it. Where
the platform lacks these primitives, every call raises `Unsupported` (fail closed). Nothing
read here is imported or executed.

The one home of this check: jmp's file tools (workers/tool) open their targets through
`Confined.inspect` too, so a FIFO, a device or a socket in a workspace is refused by name
there as here (issue 32).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Components = tuple[bytes, ...]


class Refused(ValueError):
    """A path or file type that the workspace does not follow or read."""


class Unsupported(OSError):
    """The platform lacks descriptor-relative, no-follow opens: the workspace fails closed."""


def missing_primitives() -> list[str]:
    """What this platform lacks for confined access (read at call time, so a test can patch os)."""
    missing = [
        flag for flag in ("O_NOFOLLOW", "O_DIRECTORY", "O_NONBLOCK") if not hasattr(os, flag)
    ]
    if os.open not in getattr(os, "supports_dir_fd", set()):
        missing.append("os.open dir_fd")
    if os.stat not in getattr(os, "supports_dir_fd", set()):
        missing.append("os.stat dir_fd")
    if os.stat not in getattr(os, "supports_follow_symlinks", set()):
        missing.append("os.stat follow_symlinks")
    if os.listdir not in getattr(os, "supports_fd", set()):
        missing.append("os.listdir fd")
    return missing


def require_primitives() -> None:
    missing = missing_primitives()
    if missing:
        raise Unsupported(f"confined workspace access is unsupported here: no {', '.join(missing)}")


def split_path(path: str) -> Components:
    """A relative path given as text -> checked components; absolute paths and `..` refused."""
    if not isinstance(path, str) or "\0" in path:
        raise Refused(f"not a path: {path!r}")
    if path.startswith(("/", "\\")) or os.path.isabs(path):
        raise Refused(f"absolute path refused: {path!r}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return check_components(tuple(os.fsencode(p) for p in parts))


def check_components(parts: Components) -> Components:
    for part in parts:
        if part in (b"", b".", b"..") or b"/" in part or b"\0" in part:
            raise Refused(f"path component {part!r} refused")
    return parts


def kind_of(mode: int) -> str:
    """A file type's name: dir, file, symlink, fifo, device, socket or other."""
    for test, name in (
        (stat.S_ISDIR, "dir"),
        (stat.S_ISREG, "file"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISCHR, "device"),
        (stat.S_ISBLK, "device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "other"


@dataclass(frozen=True)
class Entry:
    name: bytes
    kind: str
    size: int
    links: int = 1  # names of the inode (st_nlink); more than one for a hard-linked file


class Confined:
    """File access confined to `root` (opened without following symlinks below it)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))

    def _open_root(self) -> int:
        require_primitives()
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK
        return os.open(self.root, flags)

    def _open_at(self, dir_fd: int, name: bytes, want: str | tuple[str, ...]) -> int:
        """Open one component of kind `want` (dir or file, or either) under `dir_fd`, never
        following; anything else is Refused, its type named."""
        wanted = (want,) if isinstance(want, str) else want
        try:
            found = kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            raise Refused(f"{os.fsdecode(name)!r} does not exist") from None
        if found not in wanted:
            raise Refused(
                f"{_show(name)} is a {found}, not a {' or '.join(wanted)}: not followed or read"
            )
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        flags |= os.O_DIRECTORY if found == "dir" else 0
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError as exc:  # ELOOP: it became a symlink since the stat
            raise Refused(f"{_show(name)} cannot be opened safely: {exc.strerror}") from None
        if kind_of(os.fstat(fd).st_mode) != found:  # swapped between stat and open
            os.close(fd)
            raise Refused(f"{_show(name)} changed type while opening it")
        return fd

    @contextmanager
    def open_dir(self, parts: Components) -> Iterator[int]:
        """A descriptor of the directory at `parts` (the root for an empty tuple)."""
        fd = self._open_root()
        try:
            for part in check_components(parts):
                child = self._open_at(fd, part, "dir")
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def list_dir(self, parts: Components, limit: int | None = None) -> tuple[list[Entry], int]:
        """The first `limit` entries (by name) of a directory with their types, and the count.

        Symlinks are reported as such, never followed; only kept entries are looked at.
        """
        with self.open_dir(parts) as fd:
            names = sorted(os.fsencode(n) for n in os.listdir(fd))
            entries = []
            for name in names[:limit]:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone since the listing
                entries.append(Entry(name, kind_of(info.st_mode), info.st_size, info.st_nlink))
            return entries, len(names)

    def inspect(self, parts: Components) -> os.stat_result:
        """The status of the regular file or directory at `parts`, found by opening every
        component without following (O_NOFOLLOW | O_NONBLOCK: a FIFO is never waited on) and
        read from the descriptor; Refused names anything else (a symlink, FIFO, device or
        socket), FileNotFoundError when a component is missing."""
        if not parts:
            with self.open_dir(parts) as fd:
                return os.fstat(fd)
        with self.open_dir(parts[:-1]) as dir_fd:
            if not _exists(dir_fd, parts[-1]):
                raise FileNotFoundError(errno.ENOENT, "no such file", display(parts))
            fd = self._open_at(dir_fd, parts[-1], ("file", "dir"))
            try:
                return os.fstat(fd)
            finally:
                os.close(fd)

    def read_bytes(self, parts: Components, limit: int) -> tuple[bytes, int, int]:
        """At most `limit` bytes of the regular file at `parts`, its size and its link count."""
        if not parts:
            raise Refused("the workspace root is not a file")
        with self.open_dir(parts[:-1]) as dir_fd:
            fd = self._open_at(dir_fd, parts[-1], "file")
            try:
                info = os.fstat(fd)
                size = info.st_size
                chunks, left = [], limit
                while left > 0:
                    chunk = os.read(fd, min(left, 1 << 16))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= len(chunk)
                return b"".join(chunks), size, info.st_nlink
            finally:
                os.close(fd)


def _exists(dir_fd: int, name: bytes) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _show(name: bytes) -> str:
    return repr(name.decode("utf-8", "backslashreplace"))


def display(parts: Components) -> str:
    """A relative path for people and Jev: `.` for the root, non-UTF-8 bytes as \\xNN."""
    return "/".join(p.decode("utf-8", "backslashreplace") for p in parts) or "."
