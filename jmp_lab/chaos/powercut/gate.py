"""The gate every operation of LossyFS passes: open, frozen (it waits) or cut (it fails with
EIO); and the rules that fire faults (EIO, ENOSPC) or freeze it at a chosen operation."""

from __future__ import annotations

import errno
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import mfusepy


@dataclass
class Rule:
    """A fault or trigger: the `nth` matching operation `op` on a path matching `pattern`."""

    op: str  # fsync (files and directories), write, create, rename, unlink, mkdir, ...
    pattern: str = ""
    nth: int = 1
    action: str = "freeze-after"  # freeze-before, freeze-after, eio, enospc
    contains: bytes = b""  # write: only writes holding these bytes count
    seen: int = 0
    fired: list[dict[str, Any]] = field(default_factory=list)

    def matches(self, op: str, path: str, data: bytes = b"") -> bool:
        if op != self.op or (self.pattern and not re.search(self.pattern, path)):
            return False
        if self.contains and self.contains not in data:
            return False
        self.seen += 1
        return self.seen == self.nth


class Gate:
    """Open, frozen (every operation waits) or cut (every operation fails with EIO)."""

    def __init__(self, lock: threading.Lock) -> None:
        self.state = "open"
        self.changed = threading.Condition(lock)
        self.fired = threading.Event()  # a trigger froze the filesystem
        self.why: dict[str, Any] = {}
        self.blocked: list[str] = []  # the operations waiting now

    def wait(self, op: str) -> None:
        """Called with the lock held: return when open, raise EIO once cut."""
        if self.state == "frozen":
            self.blocked.append(op)
            try:
                while self.state == "frozen":
                    self.changed.wait()
            finally:
                self.blocked.remove(op)
        if self.state == "cut":
            raise mfusepy.FuseOSError(errno.EIO)

    def freeze(self, why: dict[str, Any]) -> None:
        if self.state == "open":
            self.state, self.why = "frozen", why
            self.fired.set()

    def cut(self) -> None:
        self.state = "cut"
        self.changed.notify_all()


class Fault(Exception):
    """A rule's injected error (errno), with what fired it."""

    def __init__(self, code: int, why: dict[str, Any]) -> None:
        super().__init__(code)
        self.errno = code
        self.why = why
