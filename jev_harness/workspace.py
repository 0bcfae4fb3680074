"""WorkspaceToolkit: `files.list(dir)`, `files.search(query)`, `files.read(path)` under a root.

Domains hold only what the run has seen: directories found by listings (the root first) and
not listed yet, the caller's queries not run yet, files found by listings or searches and not
read yet. Symlinks, FIFOs, devices and sockets are listed as omitted and never offered; a hard
link (a file with more than one name) is offered and read, marked as one wherever it is shown
(listing, option, search match, read summary and metadata). Every result states its bounds
(entries listed, bytes read, files scanned, matches shown). A read captures the file once in
the evidence store and shows its first window; later windows are read from the store.
Confinement and fail-closed rules: `jev_harness.workspace_fs`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jev_harness.evidence_store import EvidenceStore
from jev_harness.model import Option, Outcome, Parameter, Tool, Toolkit
from jev_harness.task import Task
from jev_harness.text import MAX_WINDOW_CHARS, clip
from jev_harness.workspace_fs import Components, Confined, Refused, display, missing_primitives

MAX_ENTRIES = 500  # entries kept from one directory listing
MAX_FILE_BYTES = 1_000_000  # bytes read from one file (a longer file is captured truncated)
MAX_MATCHES = 50  # search matches reported
MAX_SCAN_FILES = 2000  # files a search looks into
MAX_SCAN_BYTES = 50_000_000  # bytes one search reads in all
MAX_DEPTH = 32  # directory depth a search descends


class WorkspaceToolkit(Toolkit):
    """Local files under `root`, read-only and confined; `queries` are the searches offered."""

    name = "files"

    def __init__(
        self, root: str | Path, queries: Iterable[str] = (), *, store: EvidenceStore | None = None
    ) -> None:
        self.fs = Confined(root)
        self.queries = list(dict.fromkeys(q for q in queries if isinstance(q, str) and q.strip()))
        self.store = store
        self.dirs: dict[str, Components] = {".": ()}  # found, in order of discovery
        self.listed: set[str] = set()
        self.files: dict[str, tuple[Components, int]] = {}  # path -> (components, size)
        self.read: set[str] = set()
        self.searched: set[str] = set()
        self.omitted: dict[str, str] = {}  # path -> kind
        self.hard_links: dict[str, int] = {}  # path -> names of its inode, when more than one

    def install(self, task: Task) -> None:
        if self.store is None:
            if task.store is None:
                task.store = EvidenceStore()
            self.store = task.store
        for tool in self._tools():
            task.register(tool)

    def _tools(self) -> list[Tool]:
        return [
            Tool(
                "files.list",
                "List a directory of the workspace (not recursive).",
                (Parameter("dir", "a directory to list", self._dir_options, "explore"),),
                self._list,
            ),
            Tool(
                "files.search",
                "Search the workspace's text files for one of the given queries.",
                (Parameter("query", "a query to run", self._query_options, "explore"),),
                self._search,
            ),
            Tool(
                "files.read",
                "Read a file of the workspace (captured once; its first window is shown).",
                (Parameter("path", "a file to read", self._path_options, "explore"),),
                self._read,
            ),
        ]

    def observe(self) -> dict[str, Any]:
        return {
            "dirs_listed": len(self.listed),
            "dirs_unlisted": len(self.dirs) - len(self.listed),
            "files_found": len(self.files),
            "files_read": len(self.read),
            "queries_left": len(self.queries) - len(self.searched),
            "omitted": len(self.omitted),
        }

    # -- domains ------------------------------------------------------------------------

    def _dir_options(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        if missing_primitives():
            return []  # fail closed: offer nothing that would need unsafe opens
        return [
            Option(path, "the workspace root" if path == "." else f"directory {path}/", parts)
            for path, parts in self.dirs.items()
            if path not in self.listed
        ]

    def _query_options(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        if missing_primitives():
            return []
        return [Option(q, f"search for {q!r}", q) for q in self.queries if q not in self.searched]

    def _path_options(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        if missing_primitives():
            return []
        return [
            Option(path, f"file {path} ({size:,} bytes{self._mark(path)})", parts)
            for path, (parts, size) in self.files.items()
            if path not in self.read
        ]

    def _mark(self, path: str) -> str:
        links = self.hard_links.get(path)
        return f"; a hard link, one of {links} names" if links else ""

    def _note_links(self, path: str, links: int) -> None:
        if links > 1:
            self.hard_links[path] = links

    # -- operations ---------------------------------------------------------------------

    def _list(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        parts: Components = chosen["dir"].value
        where = display(parts)
        self.listed.add(where)
        kept, total = self.fs.list_dir(parts, MAX_ENTRIES)
        lines: list[str] = []
        omitted = 0
        for entry in kept:
            path, comps = display((*parts, entry.name)), (*parts, entry.name)
            kind = entry.kind
            if self._ambiguous(path, comps):
                kind = "ambiguous name"  # two raw names escape to the same text: offer neither
            if kind == "dir":
                self.dirs.setdefault(path, comps)
                lines.append(f"{path}/")
            elif kind == "file":
                self.files.setdefault(path, (comps, entry.size))
                self._note_links(path, entry.links)
                lines.append(f"{path} ({entry.size:,} bytes{self._mark(path)})")
            else:
                omitted += 1
                self.omitted[path] = kind
                lines.append(f"{path} (omitted: {kind})")
        bounds = {"entries": total, "listed": len(kept), "limit": MAX_ENTRIES}
        head = f"{where}: {len(kept)} of {total} entries listed (limit {MAX_ENTRIES})"
        return Outcome(
            "ok",
            f"{head}, {omitted} omitted",
            text=_bounded_lines(head, lines),
            source=where,
            target=where,
            data={**bounds, "omitted": omitted},
        )

    def _ambiguous(self, path: str, comps: Components) -> bool:
        known = self.dirs.get(path) or self.files.get(path, ((), 0))[0]
        return bool(known) and known != comps

    def _read(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        parts: Components = chosen["path"].value
        path = display(parts)
        self.read.add(path)  # once, even if it fails: nothing is re-read
        data, size, links = self.fs.read_bytes(parts, MAX_FILE_BYTES)
        if b"\0" in data[:8192]:
            raise Refused(f"{path} looks binary (NUL bytes): not captured")
        self._note_links(path, links)
        truncated = size > len(data)
        text = data.decode("utf-8", "replace")
        assert self.store is not None
        meta = {"path": path, "size": size, "bytes_read": len(data), "truncated": truncated}
        meta["hard_links"] = links
        ref = self.store.put(text, path, meta)
        end = min(len(text), MAX_WINDOW_CHARS)
        cut = " (truncated capture)" if truncated else ""
        summary = f"read {path}{self._mark(path)}: {len(data):,} of {size:,} bytes{cut}, "
        summary += f"{len(text):,} chars as {ref}"
        return Outcome(
            "ok",
            summary,
            text=self.store.read(ref, 0, end),
            source=path,
            target=ref,
            window=(ref, 0, end),
            data={**meta, "ref": ref, "limit_bytes": MAX_FILE_BYTES},
        )

    def _search(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        query: str = chosen["query"].value
        self.searched.add(query)
        needle = query.casefold()
        matches: list[str] = []
        found = 0
        scanned = scanned_bytes = 0
        for parts in self._walk_files():
            if scanned >= MAX_SCAN_FILES or scanned_bytes >= MAX_SCAN_BYTES:
                break
            try:
                data, _size, links = self.fs.read_bytes(parts, MAX_FILE_BYTES)
            except (Refused, OSError):
                continue  # changed under us, or unreadable: skipped, never followed
            scanned += 1
            scanned_bytes += len(data)
            if b"\0" in data[:8192]:
                continue
            hits = _hits(data.decode("utf-8", "replace"), needle)
            path = display(parts)
            if hits and not self._ambiguous(path, parts):
                self.files.setdefault(path, (parts, len(data)))
                self._note_links(path, links)
                found += len(hits)
                shown_path = f"{path} (hard link)" if links > 1 else path
                matches += [f"{shown_path}:{n}: {clip(line.strip(), 120)}" for n, line in hits]
        shown = matches[:MAX_MATCHES]
        head = (
            f"{query!r}: {found} matches, {len(shown)} shown (limit {MAX_MATCHES}); "
            f"{scanned} files scanned (limit {MAX_SCAN_FILES}), {scanned_bytes:,} bytes "
            f"(limit {MAX_SCAN_BYTES:,})"
        )
        counts = {"matches": found, "shown": len(shown), "files_scanned": scanned}
        counts |= {"bytes_scanned": scanned_bytes, "limit_matches": MAX_MATCHES}
        return Outcome("ok", head, text=_bounded_lines(head, shown), target=query, data=counts)

    def _walk_files(self) -> Iterable[Components]:
        """Regular files breadth-first from the root; symlinks and special files skipped."""
        queue: deque[Components] = deque([()])
        while queue:
            parts = queue.popleft()
            try:
                entries, _total = self.fs.list_dir(parts, MAX_ENTRIES)
            except (Refused, OSError):
                continue
            for entry in entries:
                child = (*parts, entry.name)
                if entry.kind == "file":
                    yield child
                elif entry.kind == "dir" and len(child) < MAX_DEPTH:
                    queue.append(child)


def _hits(text: str, needle: str) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if needle in line.casefold()]


def _bounded_lines(head: str, lines: list[str]) -> str:
    """The head and as many whole lines as fit in 1,200 characters, saying how many did not."""
    out, used = [head], len(head)
    for index, line in enumerate(lines):
        more = f"... {len(lines) - index} more not shown"
        if used + len(line) + 1 + len(more) + 1 > MAX_WINDOW_CHARS:
            out.append(more)
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)
