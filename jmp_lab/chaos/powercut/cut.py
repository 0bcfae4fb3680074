"""The cut: the tree the disk holds after a power loss now, from an Image (model.py).

The durable names, each file's durable bytes, and by variant what else made it: unsynced data
lost, or torn (of the appended bytes a prefix cut at a random byte or page boundary, each
overwritten page written or not); unsynced directory changes lost, or a random subset kept
(journal: a prefix, in order). The image itself is left unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from jmp_lab.chaos.powercut.model import PAGE, ROOT, Image, Node

DATA_VARIANTS = ("lose", "torn-byte", "torn-page")  # what becomes of unsynced data at a cut
DIR_VARIANTS = ("lose", "subset")  # what becomes of unsynced directory changes at a cut
Reader = Callable[[int], bytes | None]  # node id -> the live bytes of that file, if reachable


@dataclass
class Entry:
    """One file of a cut's tree: its path and what the disk holds for it."""

    path: str
    kind: str
    mode: int
    data: bytes = b""  # file: content; symlink: target
    node: int = 0  # the same node under two paths is one file (a hard link)


@dataclass
class CutReport:
    """What a cut took away, relative to what processes saw just before it."""

    entries: list[Entry]
    reverted: list[str] = field(default_factory=list)  # "path: live N bytes, durable M"
    torn: list[str] = field(default_factory=list)  # "path: kept N of M unsynced bytes"
    undone: list[str] = field(default_factory=list)  # directory ops lost ("rename a -> b")
    kept: list[str] = field(default_factory=list)  # unsynced directory ops the cut kept


def take(image: Image, rng: random.Random, data: str, dirs: str, reader: Reader) -> CutReport:
    """The tree after a cut now, with variants `data` and `dirs` drawn from `rng`."""
    if data not in DATA_VARIANTS or dirs not in DIR_VARIANTS:
        raise ValueError(f"unknown cut variant {data!r}/{dirs!r}")
    report = CutReport([])
    kept = _kept(image, rng) if dirs == "subset" else set()
    for op in image.pending:
        (report.kept if op.seq in kept else report.undone).append(f"{op.kind} {op.path}")
    walk = _Walk(image, report, rng, data, reader)
    report.entries = tree(image, kept, walk.content)
    return report


def tree(image: Image, kept: set[int], content: Callable[[Node, str], bytes]) -> list[Entry]:
    """The tree on the disk: the durable names with the unsynced ops numbered in `kept`
    applied too (a later op's entry is never undone by an earlier one), each file's bytes as
    `content(node, path)` says (asked once per node). The image is left unchanged."""
    durable = {d: dict(entries) for d, entries in image.durable.items()}
    version = dict(image.version)
    for op in image.pending:
        if op.seq not in kept:
            continue
        for change in op.changes:
            key = (change.directory, change.name)
            if version.get(key, -1) > op.seq:
                continue  # a later op already made this entry durable
            version[key] = op.seq
            entries = durable.setdefault(change.directory, {})
            if change.node is None:
                entries.pop(change.name, None)
            else:
                entries[change.name] = change.node
    walk = _Tree(image, durable, content)
    walk.directory(ROOT, "")
    return walk.entries


def _kept(image: Image, rng: random.Random) -> set[int]:
    """Which unsynced ops a cut keeps: any subset, or (journal: in order) a prefix."""
    if image.model == "journal":
        return {op.seq for op in image.pending[: rng.randint(0, len(image.pending))]}
    return {op.seq for op in image.pending if rng.random() < 0.5}


@dataclass
class _Tree:
    image: Image
    durable: dict[int, dict[str, int]]
    content: Callable[[Node, str], bytes]
    entries: list[Entry] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    contents: dict[int, bytes] = field(default_factory=dict)

    def directory(self, directory: int, prefix: str) -> None:
        self.seen.add(directory)
        entries = self.entries
        for name in sorted(self.durable.get(directory, {})):
            node = self.durable[directory][name]
            state = self.image.nodes[node]
            path = f"{prefix}/{name}"
            if state.kind == "dir":
                if node in self.seen:
                    continue  # a cycle from half-committed directory renames: fsck drops it
                entries.append(Entry(path, "dir", state.mode, node=node))
                self.directory(node, path)
            elif state.kind == "symlink":
                entries.append(Entry(path, "symlink", state.mode, state.target.encode(), node))
            elif state.kind == "file":
                if node not in self.contents:
                    self.contents[node] = self.content(state, path)
                entries.append(Entry(path, "file", state.mode, self.contents[node], node))
            else:
                entries.append(Entry(path, state.kind, state.mode, node=node))


@dataclass
class _Walk:
    """What a random cut makes of each file's unsynced data (`take`)."""

    image: Image
    report: CutReport
    rng: random.Random
    data: str
    reader: Reader

    def content(self, state: Node, path: str) -> bytes:
        durable = bytes(state.durable)
        live = self.reader(state.id)
        if live is None or live == durable:
            return durable
        if self.data == "lose" or not state.dirty:
            self.report.reverted.append(f"{path}: live {len(live)} bytes, durable {len(durable)}")
            return durable
        result = torn(state, durable, live, self.rng, PAGE if self.data == "torn-page" else 1)
        extra = max(0, len(live) - len(durable))
        kept = max(0, len(result) - len(durable))
        self.report.torn.append(f"{path}: kept {kept} of {extra} unsynced bytes")
        return result


def torn(state: Node, durable: bytes, live: bytes, rng: random.Random, unit: int) -> bytes:
    """Unsynced data reached the disk in part: of the appended bytes a prefix cut at a random
    boundary (a multiple of `unit` from the start of the file, or the live end), of the
    overwritten pages each one or not. Pages never written since stay as they were."""
    out = bytearray(durable)
    for page in sorted(state.dirty):
        start = page * PAGE
        if start < len(durable) and rng.random() < 0.5:
            end = min(len(durable), len(live), start + PAGE)
            out[start:end] = live[start:end]
    if len(live) > len(durable):
        low, high = len(durable), len(live)
        stops = list(range(low - low % unit + unit, high, unit)) if unit > 1 else []
        end = rng.choice([low, *stops, high]) if unit > 1 else rng.randint(low, high)
        out += bytes(end - low)
        for page in range(low // PAGE, (end + PAGE - 1) // PAGE):
            if page in state.dirty:  # else never written since a failed sync: zeros
                start, stop = max(low, page * PAGE), min(end, (page + 1) * PAGE)
                out[start:stop] = live[start:stop]
    return bytes(out)
