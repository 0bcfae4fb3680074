"""LossyFS's operations on directory entries: each one an op of the image (model.py)."""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

import mfusepy

from jmp_lab.chaos.powercut.fsbase import KINDS, FSBase


class NameOps(FSBase):
    """mkdir, mknod, symlink, link, unlink, rmdir, rename; opendir, readdir and fsyncdir."""

    def opendir(self, path: str) -> int:
        with self.mutex:
            self.gate.wait("opendir")
            node = self.image.lookup(path)
            if node is None or not os.path.isdir(self.full(path)):
                raise mfusepy.FuseOSError(errno.ENOENT)
            handle = next(self._handles)
            self.dirs[handle] = node
        return handle

    def readdir(self, path: str | None, fh: int) -> list[str]:
        with self.mutex:
            self.gate.wait("readdir")
            node = self.dirs.get(fh)
            where = self.image.path_of(node) if node is not None else path
            if where is None:
                return [".", ".."]
            return [".", "..", *os.listdir(self.full(where))]

    def releasedir(self, path: str | None, fh: int) -> int:
        with self.mutex:
            self.dirs.pop(fh, None)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            node = self.dirs.get(fh) or self._node_of(path, None)
            where = self._path_of(node, path)
            commits = self.image.pending_names(node) if node is not None else None
            after = self._entered("fsync", where, commits=commits)  # EIO: entries stay unsynced
            if node is not None:
                self.image.sync(node, None)
            self._leave(after, "fsync", where)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        return self._make("mkdir", path, "dir", mode, lambda: os.mkdir(self.full(path), mode))

    def mknod(self, path: str, mode: int, dev: int) -> int:
        kind = KINDS.get(stat.S_IFMT(mode), "special")
        return self._make("mknod", path, kind, mode, lambda: os.mknod(self.full(path), mode, dev))

    def symlink(self, path: str, target: str) -> int:
        return self._make(
            "symlink", path, "symlink", 0o777, lambda: os.symlink(target, self.full(path)), target
        )

    def _make(self, op: str, path: str, kind: str, mode: int, do: Any, target: str = "") -> int:
        with self.mutex:
            after = self._entered(op, path)
            do()
            self.image.create(path, kind, stat.S_IMODE(mode), target)
            self._leave(after, op, path)
        return 0

    def unlink(self, path: str) -> int:
        return self._remove("unlink", path, os.unlink)

    def rmdir(self, path: str) -> int:
        return self._remove("rmdir", path, os.rmdir)

    def _remove(self, op: str, path: str, do: Any) -> int:
        with self.mutex:
            after = self._entered(op, path)
            do(self.full(path))
            self.image.remove(path)
            self._leave(after, op, path)
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        if flags:
            raise mfusepy.FuseOSError(errno.EINVAL)  # RENAME_EXCHANGE/NOREPLACE: not modelled
        with self.mutex:
            after = self._entered("rename", new)
            os.rename(self.full(old), self.full(new))
            self.image.rename(old, new)
            self._leave(after, "rename", new)
        return 0

    def link(self, path: str, source: str) -> int:
        with self.mutex:
            after = self._entered("link", path)
            os.link(self.full(source), self.full(path), follow_symlinks=False)
            node = self.image.lookup(source)
            if node is not None:
                self.image.link(node, path)
            self._leave(after, "link", path)
        return 0
