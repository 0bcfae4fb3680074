"""The lossy filesystem: every operation passes through to the backing directory, and the
durable image (model.py) is kept beside it under one lock, in the order the operations ran.

Faults and cuts are armed over the control socket (daemon.py): EIO on the n-th fsync of a
matching path (its written pages are forgotten, as Linux does), ENOSPC on the n-th write, and
triggers that freeze the filesystem before or after the n-th operation of a kind on a matching
path (a write may also have to contain given bytes). Frozen, every operation but flush and
release waits; at the cut they fail with EIO, so nothing a process does after the freeze
reaches the disk.

Not provided (the kernel or nothing does it): flock and POSIX locks are the kernel's own,
local to this mount (that is what jmp's session lock and SQLite need); shared writable mmap is
the kernel's page cache, written back to us as writes; xattrs, ioctl and RENAME_EXCHANGE /
RENAME_NOREPLACE are refused (ENOTSUP, EINVAL).
"""

from __future__ import annotations

import errno
import os
import stat

import mfusepy

from jmp_lab.chaos.powercut.fsbase import read_fd
from jmp_lab.chaos.powercut.gate import Fault
from jmp_lab.chaos.powercut.names import NameOps


class LossyFS(NameOps):
    """A passthrough to `backing` that keeps `image`; the operations on file data here, those
    on names in names.py, metadata and the helpers in fsbase.py."""

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            after = self._entered("open", path)
            fd = _open(self.full(path), flags)
            node = self.image.lookup(path)
            if node is not None:
                self.nodes[fd] = node
                if flags & os.O_TRUNC:
                    self.image.truncate(node, 0)
            self._leave(after, "open", path)
        return fd

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        with self.mutex:
            after = self._entered("create", path)
            existed = self.image.lookup(path)
            fd = _open(self.full(path), flags | os.O_CREAT, mode)
            node = existed or self.image.create(path, "file", stat.S_IMODE(mode))
            self.nodes[fd] = node
            if existed and flags & os.O_TRUNC:
                self.image.truncate(node, 0)
            self._leave(after, "create", path)
        return fd

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self.mutex:
            self.gate.wait("read")
            return os.pread(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            node = self.nodes.get(fh)
            where = self._path_of(node, path)
            after = self._entered("write", where, data)
            written = os.pwrite(fh, data, offset)
            if node is not None:
                self.image.write(node, offset, written, data)
            self._leave(after, "write", where)
        return written

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self.mutex:
            node = self._node_of(path, fh)
            where = self._path_of(node, path)
            after = self._entered("truncate", where)
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self.full(where), length)
            if node is not None:
                self.image.truncate(node, length)
            self._leave(after, "truncate", where)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        if mode:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)  # punch holes, keep size: not modelled
        with self.mutex:
            node = self.nodes.get(fh)
            after = self._entered("write", self._path_of(node, path))
            os.posix_fallocate(fh, offset, size)  # new pages are zeros: nothing dirty to keep
            self._leave(after, "write", self._path_of(node, path))
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            node = self.nodes.get(fh)
            where = self._path_of(node, path)
            try:
                after = self._enter("fsync", where)
            except Fault as fault:
                if node is not None:
                    self.image.sync_failed(node)
                raise mfusepy.FuseOSError(fault.errno) from None
            if node is not None:
                self.image.sync(node, read_fd(fh))
            self._leave(after, "fsync", where)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close(2) of one descriptor: nothing reaches the disk by it

    def release(self, path: str | None, fh: int) -> int:
        with self.mutex:
            if self.gate.state == "frozen":
                self.deferred.append(fh)  # keep the live bytes readable until the cut
                return 0
            self.nodes.pop(fh, None)
            os.close(fh)
        return 0


def _open(path: str, flags: int, mode: int = 0o644) -> int:
    """The backing descriptor: read-write when allowed (a sync reads the file through it),
    never O_APPEND (the kernel already chose the offset of every write)."""
    base = flags & ~(os.O_APPEND | os.O_ACCMODE | os.O_EXCL) | os.O_CLOEXEC | os.O_NOFOLLOW
    if flags & os.O_CREAT and flags & os.O_EXCL:
        base |= os.O_EXCL
    try:
        return os.open(path, base | os.O_RDWR, mode)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EISDIR, errno.ETXTBSY):
            raise
        return os.open(path, base | (flags & os.O_ACCMODE), mode)
