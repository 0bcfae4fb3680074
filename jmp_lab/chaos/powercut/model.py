"""The durable image: what the disk would hold after a power cut, beside what processes see.

Pure bookkeeping, no I/O (the FUSE layer in fs.py calls it under its lock, and its own tests
call it directly). Nodes (files, directories, links, special files) are numbered here, never by
the backing filesystem, whose inode numbers are reused.

- **Names.** Every change to a directory entry (create, mkdir, link, symlink, unlink, rmdir,
  rename) is an `Op` with a sequence number, holding the entry `Change`s it made. The durable
  namespace applies an op's changes when a sync commits them; which sync commits what is the
  model (`MODELS`). An entry never goes back to an older op's value: each durable entry keeps
  the number of the op that set it (last writer wins, however the commits were ordered).
- **Data.** A file keeps its bytes as of its last successful fsync/fdatasync and the set of
  pages written since. A sync takes those pages (and the size) from the live file; pages beyond
  the old size that were never written since come back as zeros. A failed sync (injected EIO)
  forgets the written pages, as Linux does: a later fsync that succeeds does not write them.

What a cut makes of it is cut.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

PAGE = 4096
ROOT = 1
# strict: only a directory's fsync makes its entries durable (POSIX as written).
# name: a file's (or directory's) fsync also makes its own names durable (btrfs-like).
# journal: any fsync makes every earlier directory change durable (ext4, xfs metadata journal).
MODELS = ("strict", "name", "journal")


@dataclass
class Node:
    id: int
    kind: str  # file, dir, symlink, fifo, socket
    mode: int
    durable: bytearray = field(default_factory=bytearray)  # file: bytes as of the last sync
    dirty: set[int] = field(default_factory=set)  # file: pages written since the last sync
    floor: int | None = None  # file: the smallest size a truncate set since the last sync
    target: str = ""  # symlink: where it points (durable with its entry)
    names: set[tuple[int, str]] = field(default_factory=set)  # live names: (directory, name)
    gone: str = ""  # the path it had when its last name went (an open file can still be written)


@dataclass
class Change:
    directory: int
    name: str
    node: int | None  # None: the entry is removed


@dataclass
class Op:
    seq: int
    kind: str
    subject: int  # the node the op is about (the created, moved, linked or removed one)
    changes: list[Change]
    path: str  # for reports: the path the op named (its destination for a rename)


class Image:
    """The live namespace (mirroring the backing directory) and the durable image."""

    def __init__(self, model: str = "strict") -> None:
        if model not in MODELS:
            raise ValueError(f"unknown model {model!r}: one of {', '.join(MODELS)}")
        self.model = model
        self.nodes: dict[int, Node] = {ROOT: Node(ROOT, "dir", 0o755)}
        self.live: dict[int, dict[str, int]] = {ROOT: {}}
        self.durable: dict[int, dict[str, int]] = {ROOT: {}}
        self.version: dict[tuple[int, str], int] = {}
        self.pending: list[Op] = []
        self.seq = 0
        self._next = ROOT + 1
        self.syncs = 0
        self.failed_syncs = 0

    # --- the live namespace ---------------------------------------------------------

    def lookup(self, path: str) -> int | None:
        """The node at `path` ("/a/b"), or None."""
        node = ROOT
        for part in _parts(path):
            entries = self.live.get(node)
            if entries is None or part not in entries:
                return None
            node = entries[part]
        return node

    def parent(self, path: str) -> tuple[int, str]:
        """(directory node, last component) of `path`; KeyError when the directory is unknown."""
        parts = _parts(path)
        if not parts:
            raise KeyError(path)
        directory = self.lookup("/" + "/".join(parts[:-1]))
        if directory is None or directory not in self.live:
            raise KeyError(path)
        return directory, parts[-1]

    def path_of(self, node: int) -> str | None:
        """One live path of `node`, or None when it has no name any more (see `gone`)."""
        parts: list[str] = []
        seen: set[int] = set()
        while node != ROOT:
            if node in seen or not self.nodes[node].names:
                return None
            seen.add(node)
            directory, name = min(self.nodes[node].names)
            parts.append(name)
            node = directory
        return "/" + "/".join(reversed(parts))

    def seed(self, path: str, kind: str, mode: int, data: bytes = b"", target: str = "") -> int:
        """A node that exists at mount time: durable as it is (name and data)."""
        directory, name = self.parent(path)
        node = self._new(kind, mode, target)
        self.nodes[node].durable = bytearray(data)
        self.live[directory][name] = node
        self.durable[directory][name] = node
        self.version[(directory, name)] = 0
        self.nodes[node].names.add((directory, name))
        return node

    def create(self, path: str, kind: str, mode: int, target: str = "") -> int:
        """A new node named `path` (file, dir, symlink, fifo, socket): an unsynced op."""
        directory, name = self.parent(path)
        node = self._new(kind, mode, target)
        changes = [*self._unname(directory, name), self._name(directory, name, node)]
        self._op(kind if kind in ("dir", "symlink") else "create", node, changes, path)
        return node

    def link(self, node: int, path: str) -> None:
        directory, name = self.parent(path)
        self._op(
            "link", node, [*self._unname(directory, name), self._name(directory, name, node)], path
        )

    def remove(self, path: str) -> int:
        """unlink or rmdir: the name goes (the node stays while a durable name or fd holds it)."""
        directory, name = self.parent(path)
        node = self.live[directory][name]
        self._op(
            "rmdir" if self.nodes[node].kind == "dir" else "unlink",
            node,
            self._unname(directory, name),
            path,
        )
        return node

    def rename(self, old: str, new: str) -> None:
        source, old_name = self.parent(old)
        target, new_name = self.parent(new)
        node = self.live[source][old_name]
        if self.live[target].get(new_name) == node:
            return  # a rename onto its own other name changes nothing (POSIX)
        changes = self._unname(source, old_name) + self._unname(target, new_name)
        changes.append(self._name(target, new_name, node))
        self._op("rename", node, changes, f"{old} -> {new}")

    def _new(self, kind: str, mode: int, target: str = "") -> int:
        node, self._next = self._next, self._next + 1
        self.nodes[node] = Node(node, kind, mode, target=target)
        if kind == "dir":
            self.live[node], self.durable[node] = {}, {}
        return node

    def _name(self, directory: int, name: str, node: int) -> Change:
        self.live[directory][name] = node
        self.nodes[node].names.add((directory, name))
        return Change(directory, name, node)

    def _unname(self, directory: int, name: str) -> list[Change]:
        node = self.live[directory].pop(name, None)
        if node is None:
            return []
        held = self.nodes[node]
        held.names.discard((directory, name))
        if not held.names:
            held.gone = self._path(directory, name)
        return [Change(directory, name, None)]

    def _path(self, directory: int, name: str) -> str:
        where = self.path_of(directory) if directory != ROOT else ""
        return f"{where or ''}/{name}"

    def _op(self, kind: str, subject: int, changes: list[Change], path: str) -> None:
        self.seq += 1
        self.pending.append(Op(self.seq, kind, subject, changes, path))

    # --- data -------------------------------------------------------------------------

    def write(self, node: int, offset: int, size: int, data: bytes = b"") -> None:
        """`size` bytes written at `offset` (`data`: those bytes, for a traced image)."""
        if size > 0:
            self.nodes[node].dirty.update(range(offset // PAGE, (offset + size - 1) // PAGE + 1))

    def truncate(self, node: int, size: int) -> None:
        state = self.nodes[node]
        state.floor = size if state.floor is None else min(state.floor, size)
        state.dirty = {p for p in state.dirty if p * PAGE < size}
        if size % PAGE:
            state.dirty.add(size // PAGE)  # the page the new end falls in is written

    # --- syncs ------------------------------------------------------------------------

    def sync(self, node: int, live: bytes | None) -> None:
        """A successful fsync/fdatasync of `node` (`live`: a file's bytes now), by the model."""
        state = self.nodes[node]
        self.syncs += 1
        if state.kind == "file" and live is not None:
            state.durable = _synced(state, live)
            state.dirty, state.floor = set(), None
        if self.model == "journal":
            self._commit(lambda op: True, lambda change: True)
            return
        if state.kind == "dir":
            self._commit(lambda op: True, lambda change: change.directory == node)
        if self.model == "name":
            self._commit(lambda op: op.subject == node, lambda change: True)

    def pending_names(self, directory: int) -> list[str]:
        """The entries of `directory` whose changes are not durable yet: what its fsync is
        there to commit (a failed one keeps them pending; see names.py fsyncdir)."""
        latest: dict[str, int | None] = {}
        for op in self.pending:
            for change in op.changes:
                if change.directory == directory:
                    latest[change.name] = change.node
        durable = self.durable.get(directory, {})
        # a temp file created and renamed away since is no change: its entry never was durable
        return sorted(name for name, node in latest.items() if durable.get(name) != node)

    def sync_failed(self, node: int) -> None:
        """An fsync that failed (EIO): the written pages are forgotten, never written later."""
        state = self.nodes[node]
        self.failed_syncs += 1
        if state.kind == "file":
            state.dirty = set()

    def _commit(self, ops: Callable[[Op], bool], changes: Callable[[Change], bool]) -> None:
        left = []
        for op in self.pending:
            if ops(op):
                for change in [c for c in op.changes if changes(c)]:
                    self._apply(op.seq, change)
                op.changes = [c for c in op.changes if not changes(c)]
            if op.changes:
                left.append(op)
        self.pending = left

    def _apply(self, seq: int, change: Change) -> None:
        key = (change.directory, change.name)
        if self.version.get(key, -1) > seq:
            return  # a later op already made this entry durable
        self.version[key] = seq
        entries = self.durable.setdefault(change.directory, {})
        if change.node is None:
            entries.pop(change.name, None)
        else:
            entries[change.name] = change.node


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def _synced(state: Node, live: bytes) -> bytearray:
    """The durable bytes after a sync: written pages (and the size) from the live file."""
    old, floor = state.durable, state.floor
    out = bytearray(len(live))
    for page in range((len(live) + PAGE - 1) // PAGE):
        start, end = page * PAGE, min(len(live), (page + 1) * PAGE)
        if page in state.dirty:
            out[start:end] = live[start:end]
        elif floor is None or start < floor:
            piece = old[start:end]
            if floor is not None:
                piece = piece[: max(0, floor - start)]
            out[start : start + len(piece)] = piece  # never written since: the old bytes, or 0
    return out
