"""LossyFS's base: state, the gate and rules, helpers, and the metadata operations."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
from typing import Any

import mfusepy

from jmp_lab.chaos.powercut.gate import Fault, Gate, Rule
from jmp_lab.chaos.powercut.model import Image

KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "dir",
    stat.S_IFLNK: "symlink",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
}
STAT_FIELDS = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_rdev", "st_blocks")
TIME_FIELDS = ("st_atime", "st_mtime", "st_ctime")


class FSBase(mfusepy.Operations):  # type: ignore[misc]
    """A passthrough to `backing` that keeps `image`: its state, gate and rules, the helpers of
    every operation, and the operations on metadata (see fs.py)."""

    use_ns = True
    flag_nopath = True  # operations on an open file get its handle, never a (stale) path
    flag_nullpath_ok = True

    def __init__(self, backing: str, image: Image) -> None:
        self.backing = backing.rstrip("/")
        self.image = image
        self.mutex = threading.Lock()
        self.gate = Gate(self.mutex)
        self.rules: list[Rule] = []
        self.nodes: dict[int, int] = {}  # open backing fd -> node
        self.dirs: dict[int, int] = {}  # opendir handle -> node
        self._handles = itertools.count(1)
        self.deferred: list[int] = []  # fds released while frozen: closed after the cut
        self.counts: dict[str, int] = {}
        self.mounted = threading.Event()

    # --- helpers ----------------------------------------------------------------------

    def full(self, path: str) -> str:
        return self.backing + path

    def _enter(
        self, op: str, path: str, data: bytes = b"", commits: list[str] | None = None
    ) -> list[Rule]:
        """With the lock held: wait at the gate, count, fire faults and `before` triggers;
        returns the `after` triggers this operation matched. `commits`: for a directory's
        fsync, the entries it is there to make durable (in what fired, for the checks)."""
        self.gate.wait(op)
        self.counts[op] = self.counts.get(op, 0) + 1
        after = []
        for rule in self.rules:
            if not rule.matches(op, path, data):
                continue
            why: dict[str, Any] = {"op": op, "path": path, "nth": rule.nth, "action": rule.action}
            if commits is not None:
                why["commits"] = commits
            rule.fired.append(why)
            if rule.action == "eio":
                raise Fault(errno.EIO, why)
            if rule.action == "enospc":
                raise Fault(errno.ENOSPC, why)
            if rule.action == "freeze-before":
                self.gate.freeze(why)
                self.gate.wait(op)
            else:
                after.append(rule)
        return after

    def _entered(
        self, op: str, path: str, data: bytes = b"", commits: list[str] | None = None
    ) -> list[Rule]:
        try:
            return self._enter(op, path, data, commits)
        except Fault as fault:
            raise mfusepy.FuseOSError(fault.errno) from None

    def _leave(self, after: list[Rule], op: str, path: str) -> None:
        for rule in after:
            self.gate.freeze({"op": op, "path": path, "nth": rule.nth, "action": rule.action})

    def _node_of(self, path: str | None, fh: int | None) -> int | None:
        if fh is not None and fh in self.nodes:
            return self.nodes[fh]
        return self.image.lookup(path) if path is not None else None

    def _path_of(self, node: int | None, path: str | None) -> str:
        """The path rules match: a live name of `node`, else the one it had when it was
        removed (SQLite writes its unlinked -shm: a rule that spares memory.sqlite3 spares it)."""
        known = self.image.path_of(node) if node is not None else None
        if known is None and node is not None and self.image.nodes[node].gone:
            known = self.image.nodes[node].gone + " (deleted)"
        return known or path or "?"

    def live_bytes(self, node: int) -> bytes | None:
        """The live content of a file node: through an open fd, else its live path."""
        for fd, held in self.nodes.items():
            if held == node:
                return read_fd(fd)
        path = self.image.path_of(node)
        if path is None:
            return None
        try:
            fd = os.open(self.full(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return read_fd(fd)
        finally:
            os.close(fd)

    # --- metadata ---------------------------------------------------------------------

    def init(self, path: str) -> None:
        self.mounted.set()

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        with self.mutex:
            self.gate.wait("getattr")
            st = os.fstat(fh) if fh is not None else os.lstat(self.full(path or "/"))
        attrs = {key: getattr(st, key) for key in STAT_FIELDS}
        attrs.update({key: getattr(st, key + "_ns") for key in TIME_FIELDS})
        return attrs

    def access(self, path: str, amode: int) -> int:
        with self.mutex:
            self.gate.wait("access")
            if not os.access(self.full(path), amode, follow_symlinks=False):
                raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def readlink(self, path: str) -> str:
        with self.mutex:
            self.gate.wait("readlink")
            return os.readlink(self.full(path))

    def statfs(self, path: str) -> dict[str, int]:
        with self.mutex:
            self.gate.wait("statfs")
            st = os.statvfs(self.full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files")
        return {key: getattr(st, key) for key in (*keys, "f_flag", "f_frsize", "f_namemax")}

    def _target(self, path: str | None, fh: int | None) -> str | int:
        """What os.chmod and friends act on: the open file, else the backing path."""
        if fh is not None:
            return fh
        if path is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        return self.full(path)

    def chmod(self, path: str | None, mode: int, fh: int | None = None) -> int:
        with self.mutex:
            self.gate.wait("chmod")
            target = self._target(path, fh)
            os.chmod(target, mode, follow_symlinks=isinstance(target, int))
            node = self._node_of(path, fh)
            if node is not None:
                self.image.nodes[node].mode = stat.S_IMODE(mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int, fh: int | None = None) -> int:
        with self.mutex:
            self.gate.wait("chown")
            target = self._target(path, fh)
            os.chown(target, uid, gid, follow_symlinks=isinstance(target, int))
        return 0

    def utimens(
        self, path: str | None, times: tuple[int, int] | None = None, fh: int | None = None
    ) -> int:
        with self.mutex:
            self.gate.wait("utimens")
            target = self._target(path, fh)
            follow = isinstance(target, int)
            if times is None:
                os.utime(target, follow_symlinks=follow)
            else:
                os.utime(target, ns=times, follow_symlinks=follow)
        return 0


def read_fd(fd: int) -> bytes:
    """A file's whole content through its descriptor."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
