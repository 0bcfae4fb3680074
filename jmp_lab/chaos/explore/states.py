"""Every crash state of a trace (powercut/trace.py), under each directory model.

A trace is replayed into a fresh `Image` of the model (model.py), with each file's live bytes
beside it. A crash can come before any persistence point (an fsync of a file or a directory)
and after the last operation: at each such point the disk holds the durable image, and of what
was not made durable yet (the un-synced window) any of the following (after ALICE's rules for
what a crash may leave between persistence points, and CrashMonkey's crash points at
persistence points):

- **directory operations**: under `strict` and `name` any subset of the pending ones (every
  subset while there are at most `SUBSETS_UP_TO`; past that, the bound: none, all, each
  prefix in order, all but one, one alone); under `journal` each prefix in order (a journal
  commits in order);
- **file data**: per file, everything unsynced lost, all of it kept, or an append torn: the
  appended bytes cut at every page boundary, every line end, and at `BYTE_CUTS` byte sizes
  (1 byte, half, all but 1 byte; the bound on byte-level tearing); overwritten pages all
  written or none (no page-by-page subsets); the caches (`CACHES`) lost or kept whole.
- **combined**: every directory variant with all data lost and with all data kept; every data
  variant of one file (the others all lost, or all kept) with no pending directory operation
  kept and with all of them kept. Two files torn at once is not enumerated (the bound).

The world (everything outside `sessions/`: the workspace, the witness files) is where effects
stay done: a state has it as it was live at the crash. States are deduplicated by content (a
hash of the whole tree); `Explored` counts both.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jmp_lab.chaos.powercut.cut import Entry, tree
from jmp_lab.chaos.powercut.model import PAGE, ROOT, Image, Node
from jmp_lab.chaos.powercut.trace import data_of

SESSIONS = "/sessions"
SUBSETS_UP_TO = 8
BYTE_CUTS = 3
CACHES = ("memory.sqlite3", "events.index")
PERSISTENCE = ("fsync",)


@dataclass(frozen=True)
class Choice:
    """Where a crash came and what of the un-synced window the disk kept."""

    point: int  # the trace event the crash came before (len(trace): after the last one)
    before: str  # that event in words ("fsync /sessions/x/events.jsonl"), or "the end"
    time: float  # when the crash came: every effect up to it happened (monotonic)
    kept: tuple[str, ...] = ()  # pending directory operations the disk kept
    undone: tuple[str, ...] = ()  # and those it lost
    data: tuple[str, ...] = ()  # files whose unsynced data was kept in part or whole

    def size(self) -> tuple[int, int, int]:
        """For the smallest reproducer: the earliest point, the fewest kept or torn changes."""
        return (self.point, len(self.kept), len(self.data))

    def describe(self) -> dict[str, Any]:
        return {
            "crash before": self.before,
            "trace event": self.point,
            "directory ops kept": list(self.kept),
            "directory ops lost": list(self.undone),
            "unsynced data kept": list(self.data),
        }


@dataclass
class State:
    choice: Choice
    entries: list[Entry]
    key: str

    def files(self) -> dict[str, bytes]:
        return {e.path: e.data for e in self.entries if e.kind == "file"}

    def recovery_key(self) -> str:
        """The content with leftover temporary names set aside (a dot in any component:
        `.tmp-*` artifacts and `.new-*` session directories not renamed into place, a shell
        rc file's temp copy): states equal but for them are recovered once (the bound on
        recoveries; the checks on the state run on every distinct state)."""
        return _key(
            e for e in self.entries if not any(p.startswith(".") for p in e.path.split("/"))
        )


@dataclass
class Explored:
    """Counts of one enumeration."""

    states: int = 0
    distinct: int = 0
    points: int = 0
    keys: set[str] = field(default_factory=set)


def replay(
    trace: list[dict[str, Any]], model: str
) -> Iterator[tuple[int, Image, dict[int, bytearray]]]:
    """(point, image, live bytes) at every crash point of `trace` under `model`: before each
    persistence point and after the last event. The image is the replay's own: use it before
    asking for the next point."""
    image = Image(model)
    live: dict[int, bytearray] = {}
    for number, event in enumerate(trace):
        if event["op"] in PERSISTENCE:
            yield number, image, live
        apply(image, live, event)
    yield len(trace), image, live


def apply(image: Image, live: dict[int, bytearray], event: dict[str, Any]) -> None:
    """One traced operation, as the filesystem ran it."""
    op = event["op"]
    if op == "seed":
        node = image.seed(
            event["path"], event["kind"], event["mode"], data_of(event), event.get("target", "")
        )
        live[node] = bytearray(data_of(event))
    elif op == "create":
        node = image.create(event["path"], event["kind"], event["mode"], event.get("target", ""))
        if node != event["node"]:
            raise ValueError(f"replay diverged: node {node} for {event}")
        live[node] = bytearray()
    elif op == "link":
        image.link(event["node"], event["path"])
    elif op == "remove":
        image.remove(event["path"])
    elif op == "rename":
        image.rename(event["old"], event["path"])
    elif op == "write":
        data, offset, buf = data_of(event), event["offset"], live[event["node"]]
        if len(buf) < offset:
            buf.extend(bytes(offset - len(buf)))
        buf[offset : offset + len(data)] = data
        image.write(event["node"], offset, len(data))
    elif op == "truncate":
        buf = live[event["node"]]
        del buf[event["size"] :]
        buf.extend(bytes(event["size"] - len(buf)))
        image.truncate(event["node"], event["size"])
    elif op == "fsync":
        node = event["node"]
        image.sync(node, bytes(live[node]) if node in live else None)
    elif op == "sync_failed":
        image.sync_failed(event["node"])


def enumerate_states(
    trace: list[dict[str, Any]], model: str, explored: Explored
) -> Iterator[State]:
    """Every distinct crash state of `trace` under `model`, in trace order (the first time a
    content is seen); `explored` counts all and distinct ones."""
    for point, image, live in replay(trace, model):
        explored.points += 1
        before = _said(trace[point]) if point < len(trace) else "the end"
        moment = trace[point - 1]["t"] if point else 0.0
        if point == len(trace):
            moment = float("inf")
        world = _live_world(image, live)
        for kept, data in _variants(image, live):
            explored.states += 1
            choice, overrides = _choice(point, before, moment, image, kept, data)
            entries = [
                e
                for e in tree(image, kept, _content(overrides))
                if e.path == SESSIONS or e.path.startswith(SESSIONS + "/")
            ] + world
            key = _key(entries)
            if key in explored.keys:
                continue
            explored.keys.add(key)
            explored.distinct += 1
            yield State(choice, entries, key)


# --- the variants -------------------------------------------------------------------


def _ours(path: str) -> bool:
    """Whether `path` (an op's, or a rename's "old -> new") is in the sessions directory."""
    return path == SESSIONS or path.startswith(SESSIONS + "/")


def _dir_variants(image: Image) -> list[set[int]]:
    """The sets of pending ops a crash may keep; the world's are always kept (it is taken as
    it was live, whatever its directory ops)."""
    world = {op.seq for op in image.pending if not _ours(op.path)}
    seqs = [op.seq for op in image.pending if _ours(op.path)]
    return [kept | world for kept in _subsets(image.model, seqs)]


def _subsets(model: str, seqs: list[int]) -> list[set[int]]:
    if model == "journal":
        return [set(seqs[:n]) for n in range(len(seqs) + 1)]
    if len(seqs) <= SUBSETS_UP_TO:
        return [set(c) for n in range(len(seqs) + 1) for c in itertools.combinations(seqs, n)]
    found = [set(seqs[:n]) for n in range(len(seqs) + 1)]
    found += [set(seqs) - {s} for s in seqs] + [{s} for s in seqs]
    return found


def _data_variants(node: Node, live: bytes) -> list[tuple[str, bytes]]:
    """(what was kept, the bytes) of one file's unsynced data, beyond "all lost"."""
    durable = bytes(node.durable)
    if live == durable or (not node.dirty and len(live) >= len(durable)):
        return []  # nothing written since the last sync (or forgotten by a failed one)
    low, high = len(durable), len(live)
    if high < low:  # truncated since: the new size reached the disk, or not
        return [(f"truncated to {high} bytes", live)]
    written = [p for p in sorted(node.dirty) if p * PAGE < low]
    found = [(f"all {high - low} unsynced bytes", _torn(node, durable, live, high, True))]
    ends = {low + PAGE * k - low % PAGE for k in range(1, (high - low) // PAGE + 2)}
    ends |= {low + i + 1 for i, b in enumerate(live[low:high]) if b == 0x0A}
    if high - low > 1:
        ends |= {low + 1, (low + high) // 2, high - 1}
    for end in sorted(e for e in ends if low <= e < high):
        found.append(
            (f"{end - low} of {high - low} appended bytes", _torn(node, durable, live, end, False))
        )
        if written:
            found.append(
                (
                    f"{end - low} of {high - low} appended bytes, overwritten pages",
                    _torn(node, durable, live, end, True),
                )
            )
    if written and high > low:
        found.append(("overwritten pages, no appended byte", _torn(node, durable, live, low, True)))
    return found


def _torn(node: Node, durable: bytes, live: bytes, end: int, overwrite: bool) -> bytes:
    out = bytearray(durable)
    low = len(durable)
    if overwrite:
        for page in sorted(node.dirty):
            start = page * PAGE
            if start < low:
                stop = min(low, len(live), start + PAGE)
                out[start:stop] = live[start:stop]
    if end > low:
        out += bytes(end - low)
        for page in range(low // PAGE, (end + PAGE - 1) // PAGE):
            if page in node.dirty:  # else never written since a failed sync: zeros
                start, stop = max(low, page * PAGE), min(end, (page + 1) * PAGE)
                out[start:stop] = live[start:stop]
    return bytes(out)


def _variants(
    image: Image, live: dict[int, bytearray]
) -> Iterator[tuple[set[int], dict[int, tuple[str, bytes]]]]:
    dirs = _dir_variants(image)
    every = {op.seq for op in image.pending}
    world = {op.seq for op in image.pending if not _ours(op.path)}
    files: dict[int, list[tuple[str, bytes]]] = {}
    for node_id, state in image.nodes.items():
        if state.kind != "file" or node_id not in live:
            continue
        if not _ours(image.path_of(node_id) or state.gone):
            continue  # the world: as it was live
        variants = _data_variants(state, bytes(live[node_id]))
        if not variants:
            continue
        if _is_cache(image, node_id):
            variants = variants[:1]
        files[node_id] = variants
    kept_all = {n: v[0] for n, v in files.items()}
    for kept in dirs:
        yield kept, {}
        if kept_all:
            yield kept, kept_all
    for node_id, variants in files.items():
        for variant in variants:
            for base in ({}, kept_all):
                for kept in (world, every) if every != world else (world,):
                    yield kept, {**base, node_id: variant}


def _is_cache(image: Image, node: int) -> bool:
    path = image.path_of(node) or image.nodes[node].gone
    return path.rsplit("/", 1)[-1].startswith(CACHES)


def _choice(
    point: int,
    before: str,
    moment: float,
    image: Image,
    kept: set[int],
    data: dict[int, tuple[str, bytes]],
) -> tuple[Choice, dict[int, bytes]]:
    ops = [(op.seq in kept, f"{op.kind} {op.path}") for op in image.pending if _ours(op.path)]
    said = tuple(
        f"{image.path_of(n) or image.nodes[n].gone}: {what}"
        for n, (what, _) in sorted(data.items())
    )
    choice = Choice(
        point,
        before,
        moment,
        tuple(s for k, s in ops if k),
        tuple(s for k, s in ops if not k),
        said,
    )
    return choice, {n: b for n, (_, b) in data.items()}


def _content(overrides: dict[int, bytes]) -> Any:
    def content(node: Node, path: str) -> bytes:
        return overrides.get(node.id, bytes(node.durable))

    return content


def _live_world(image: Image, live: dict[int, bytearray]) -> list[Entry]:
    """Everything outside sessions/ as processes saw it: the world keeps its effects."""
    entries: list[Entry] = []

    def walk(directory: int, prefix: str) -> None:
        for name in sorted(image.live.get(directory, {})):
            node = image.live[directory][name]
            path = f"{prefix}/{name}"
            if path == SESSIONS:
                continue
            state = image.nodes[node]
            if state.kind == "dir":
                entries.append(Entry(path, "dir", state.mode, node=node))
                walk(node, path)
            elif state.kind == "file":
                entries.append(Entry(path, "file", state.mode, bytes(live.get(node, b"")), node))
            elif state.kind == "symlink":
                entries.append(Entry(path, "symlink", state.mode, state.target.encode(), node))

    walk(ROOT, "")
    return entries


def _key(entries: Iterable[Entry]) -> str:
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        digest.update(f"{entry.path}\0{entry.kind}\0{len(entry.data)}\0".encode())
        digest.update(entry.data)
    return digest.hexdigest()


def _said(event: dict[str, Any]) -> str:
    return f"{event['op']} {event.get('kind', '')} {event.get('path', '')}".replace("  ", " ")
