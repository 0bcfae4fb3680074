"""The trace of a mount: every change the filesystem saw, in order, one JSON line each.

`TracedImage` is an `Image` (model.py) that also writes each operation it is told of to a
trace file, under the filesystem's lock and in the order it ran: which process (the FUSE
caller's pid), when (`time.monotonic()`, the clock every process of this machine shares,
taken after the operation), what (create, write with offset and bytes, truncate, fsync of a
file or a directory, link, unlink, rmdir, rename) and, for a write to a log, which record it
serves (the `kind` of the JSON line it writes). The trace does not depend on the model: the
crash-state explorer (jmp_lab/chaos/explore) replays one trace into an Image of each model.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from jmp_lab.chaos.powercut.model import Image

KIND = re.compile(rb'"kind":\s*"([a-z_]+)"')


class TracedImage(Image):
    """An Image that writes every operation to `out` (see the module docstring)."""

    def __init__(self, model: str, out: IO[bytes], who: Callable[[], int] = lambda: 0) -> None:
        super().__init__(model)
        self.out = out
        self.who = who

    def _emit(self, op: str, **fields: Any) -> None:
        fields.update(op=op, t=time.monotonic(), pid=self.who())
        self.out.write(json.dumps(fields, separators=(",", ":")).encode() + b"\n")
        self.out.flush()

    def seed(self, path: str, kind: str, mode: int, data: bytes = b"", target: str = "") -> int:
        node = super().seed(path, kind, mode, data, target)
        self._emit(
            "seed", path=path, kind=kind, mode=mode, node=node, target=target, data=_b64(data)
        )
        return node

    def create(self, path: str, kind: str, mode: int, target: str = "") -> int:
        node = super().create(path, kind, mode, target)
        self._emit("create", path=path, kind=kind, mode=mode, node=node, target=target)
        return node

    def link(self, node: int, path: str) -> None:
        super().link(node, path)
        self._emit("link", node=node, path=path)

    def remove(self, path: str) -> int:
        node = super().remove(path)
        self._emit("remove", path=path, node=node)
        return node

    def rename(self, old: str, new: str) -> None:
        node = self.lookup(old)
        super().rename(old, new)
        self._emit("rename", old=old, path=new, node=node)

    def write(self, node: int, offset: int, size: int, data: bytes = b"") -> None:
        super().write(node, offset, size, data)
        serves = [k.decode() for k in KIND.findall(data[:size])]
        self._emit(
            "write",
            node=node,
            path=self.path_of(node) or self.nodes[node].gone,
            offset=offset,
            data=_b64(data[:size]),
            serves=serves,
        )

    def truncate(self, node: int, size: int) -> None:
        super().truncate(node, size)
        self._emit("truncate", node=node, path=self.path_of(node) or "", size=size)

    def sync(self, node: int, live: bytes | None) -> None:
        super().sync(node, live)
        kind = self.nodes[node].kind
        self._emit("fsync", node=node, path=self.path_of(node) or self.nodes[node].gone, kind=kind)

    def sync_failed(self, node: int) -> None:
        super().sync_failed(node)
        self._emit("sync_failed", node=node, path=self.path_of(node) or "")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_of(event: dict[str, Any]) -> bytes:
    """The bytes of a `write` or `seed` event."""
    return base64.b64decode(event.get("data", ""))


def read_trace(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a trace file (a last line cut short by the daemon's end is skipped)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                yield json.loads(line)
