"""The recall index: SQLite FTS5 over the session's own history (`memory.sqlite3`).

A disposable cache: a missing, foreign or corrupt file is deleted and rebuilt from the log.
Ordinary context building never sees an exception from here; only the explicit `recall` tool
gets a RecallError. User, final and tool records and full outputs are indexed in
overlapping pages, each with seq, kind, tool, target and typed provenance.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.context.state import events_after
from kernel.errors import JmpError
from protocol.events import (
    ErrorData,
    Event,
    FinalData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

SCHEMA_VERSION = "1"
WORD = re.compile(r"\w+")
PAGE_CHARS = 2048
OVERLAP_CHARS = 256
MAX_OUTPUT_CHARS = 1_000_000  # outputs beyond this are indexed up to here (the artifact keeps all)
MAX_TERMS = 16
# The target column is repeated on every page of a record: bounded, so that indexing stays
# linear in the text (a 10 MB command copied onto each 2 KB page was quadratic; issue 9).
TARGET_CHARS = 256
# Ranking cost grows with the number of matching pages; terms are used rarest first while
# the pages they match stay under this, and a query of only very common words is answered
# newest first instead (FTS5 stops early on rowid order). Keeps p95 low at 100k pages.
# Page counts per word live in our own `terms` table: fts5vocab counts by reading doclists.
RANKED_MATCHES = 2000
MAX_ANSWERS = 16  # relevant() answers kept until the next pages arrive
PROVENANCE = {
    "user": "user instruction",
    "final": "assistant conversation",
    "tool": "historical effect",
}
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages(
    id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, part INTEGER NOT NULL, kind TEXT NOT NULL,
    tool TEXT NOT NULL, target TEXT NOT NULL, call_id TEXT NOT NULL, provenance TEXT NOT NULL,
    body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS pages_seq ON pages(seq);
CREATE INDEX IF NOT EXISTS pages_call ON pages(call_id);
CREATE TABLE IF NOT EXISTS terms(term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(
    body, target, kind UNINDEXED, content='pages', content_rowid='id',
    tokenize='unicode61 remove_diacritics 0');
"""
COLUMNS = "p.seq, p.part, p.kind, p.tool, p.target, p.provenance, p.body"
INDEXED = (UserData, FinalData, ToolStartedData, ToolFinishedData, ToolUncertainData, ErrorData)


class RecallError(JmpError):
    """The explicit `recall` tool could not answer (bad arguments or an unusable index)."""


@dataclass(frozen=True)
class Page:
    """One indexed page of history."""

    seq: int
    part: int
    kind: str
    tool: str
    target: str
    provenance: str
    text: str


def query_terms(text: str, max_terms: int | None = MAX_TERMS) -> list[str]:
    """The distinct lower-case words of `text`; quotes and operators are dropped, never parsed."""
    words = dict.fromkeys(WORD.findall(text.lower()))
    return list(words)[:max_terms] if max_terms is not None else list(words)


def fts_query(terms: list[str], mode: str = "AND") -> str:
    """Quote each term as an FTS5 string so nothing in it acts as an operator."""
    return f" {mode} ".join('"' + term.replace('"', '""') + '"' for term in terms)


def split_pages(text: str, size: int = PAGE_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Overlapping pages of `size` characters; each starts `overlap` before the previous end."""
    if len(text) <= size:
        return [text] if text else []
    step = size - overlap
    return [text[i : i + size] for i in range(0, len(text) - overlap, step)]


class RecallIndex:
    """FTS5 pages over one session's log. Construct with `open_or_rebuild`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._inode = 0
        self._known: tuple[str, int] | None = None  # (session, through) this connection indexed
        # relevant() answers while the pages stay the same (a step projects twice, often alike)
        self._answers: dict[tuple[Any, ...], list[Page]] = {}
        self.problem = ""  # why the index is unusable, when it is

    # --- opening -----------------------------------------------------------------

    @classmethod
    def open_or_rebuild(cls, path: str | os.PathLike[str]) -> RecallIndex:
        """Open the cache, recreating it when corrupt or foreign; never raises."""
        index = cls(path)
        index._ensure()
        return index

    def _ensure(self) -> bool:
        """A usable connection to the file at `path` (reopened if the file was replaced)."""
        if self._db is not None and self._same_file():
            return True
        self.close()
        for attempt in range(2):
            try:
                self._connect()
                return True
            except (sqlite3.Error, OSError) as exc:
                self.problem = f"{type(exc).__name__}: {exc}"
                self.close()
                if attempt == 0:
                    self._delete_files()
        return False

    def _connect(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            # SQLite follows links: a planted one would put the history outside the session
            # (issue 9, item 8). Refused here; _ensure then deletes the link, never its target.
            if os.path.islink(f"{self.path}{suffix}"):
                raise OSError(f"{self.path}{suffix} is a symbolic link")
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a disposable cache: no fsync per commit
            db.executescript(SCHEMA)
            version = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if version is None:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif version[0] != SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"recall schema {version[0]} is not {SCHEMA_VERSION}")
        except BaseException:
            db.close()
            raise
        self._db = db
        self._inode = os.lstat(self.path).st_ino
        self._known = None
        self._answers = {}
        self.problem = ""

    def _same_file(self) -> bool:
        try:
            return os.lstat(self.path).st_ino == self._inode
        except OSError:
            return False

    def _delete_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def rebuild(self) -> bool:
        """Delete the cache files and create an empty index."""
        self.close()
        self._delete_files()
        return self._ensure()

    def close(self) -> None:
        """Close the connection (the file stays)."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        self._known = None
        self._answers = {}

    # --- indexing ------------------------------------------------------------------

    def sync(self, events: list[Event], read_artifact: Callable[[str], str] | None = None) -> int:
        """Index the events after the last indexed seq; returns pages added; never raises."""
        for attempt in range(2):
            try:
                if not self._ensure():
                    return 0
                return self._sync(events, read_artifact)
            except (sqlite3.Error, OSError) as exc:
                self.problem = f"{type(exc).__name__}: {exc}"
                if attempt == 0:
                    self.rebuild()
        return 0

    def _stored(self) -> tuple[str | None, int]:
        """The session id and last seq the file says it has indexed."""
        assert self._db is not None
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        return meta.get("session_id"), int(meta.get("through") or 0)

    def _nothing_new(self, events: list[Event], session_id: str, last: int) -> bool:
        """Only unindexed kinds (routes, usage...) since this connection's last sync: no SQL."""
        known = self._known
        if self._db is None or known is None or known[0] != session_id or known[1] > last:
            return False
        return not any(isinstance(e.data, INDEXED) for e in events_after(events, known[1]))

    def _sync(self, events: list[Event], read_artifact: Callable[[str], str] | None) -> int:
        if not events:
            return 0
        session_id, last = events[0].session_id, events[-1].seq or 0
        if self._nothing_new(events, session_id, last):
            # The file's `through` may lag: the events in between yield no pages when redone.
            self._known = (session_id, last)
            return 0
        stored, through = self._stored()
        if stored not in (None, session_id) or through > last:
            self.rebuild()  # a foreign or newer cache: start over from the log
            through = 0
        assert self._db is not None
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            pages = list(self._pages(events_after(events, through), read_artifact))
            if pages:
                self._insert(pages)
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [("session_id", session_id), ("through", str(last))],
            )
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self._known = (session_id, last)
        return len(pages)

    def _insert(self, pages: list[tuple[Any, ...]]) -> None:
        """Add pages, their FTS rows and term counts (inside the caller's transaction)."""
        assert self._db is not None
        db = self._db
        self._answers = {}
        # Ids are given, not taken from lastrowid, so each table is one executemany.
        first = int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM pages").fetchone()[0])
        db.executemany(
            "INSERT INTO pages(id, seq, part, kind, tool, target, call_id, provenance, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(first + i, *page) for i, page in enumerate(pages)],
        )
        db.executemany(
            "INSERT INTO pages_fts(rowid, body, target, kind) VALUES (?, ?, ?, ?)",
            [(first + i, page[7], page[4], page[2]) for i, page in enumerate(pages)],
        )
        counts: Counter[str] = Counter()
        for page in pages:
            counts.update(set(query_terms(f"{page[7]} {page[4]}", max_terms=None)))
        db.executemany(
            "INSERT INTO terms VALUES (?, ?) "
            "ON CONFLICT(term) DO UPDATE SET docs = docs + excluded.docs",
            counts.items(),
        )

    def _pages(
        self, events: list[Event], read_artifact: Callable[[str], str] | None
    ) -> Iterator[tuple[Any, ...]]:
        """Rows for `pages`: (seq, part, kind, tool, target, call_id, provenance, body)."""
        targets: dict[str, str] = {}
        for event in events:
            seq, data = event.seq or 0, event.data
            if isinstance(data, UserData):
                yield from _rows(seq, "user", "", "", "", PROVENANCE["user"], data.text)
            elif isinstance(data, FinalData):
                text = f"[{data.status}] {data.summary}"
                yield from _rows(seq, "final", "", "", "", PROVENANCE["final"], text)
            elif isinstance(data, ToolStartedData):
                targets[data.call_id] = data.target
                text = f"{data.tool} {data.target} started {data.arguments}"
                yield from _tool_rows(seq, "tool_started", data.tool, data.target, data, text)
            elif isinstance(data, ToolFinishedData):
                target = data.target or targets.get(data.call_id) or self._target(data.call_id)
                yield from self._finished(seq, data, target, read_artifact)
            elif isinstance(data, ToolUncertainData):
                target = data.target or targets.get(data.call_id) or self._target(data.call_id)
                text = f"outcome unknown; not re-run ({data.cause}): {data.note}"
                yield from _tool_rows(seq, "tool_uncertain", data.tool, target, data, text)
            elif isinstance(data, ErrorData):
                text = f"error in {data.stage}: {data.error_class}: {data.message}"
                yield from _rows(seq, "error", "", "", "", PROVENANCE["tool"], text)

    def _finished(
        self,
        seq: int,
        data: ToolFinishedData,
        target: str,
        read_artifact: Callable[[str], str] | None,
    ) -> Iterator[tuple[Any, ...]]:
        code = "" if data.exit_code is None else f" exit code {data.exit_code}"
        head = f"{data.tool} {target} {data.status}{code} {data.arguments}\n{data.error}"
        rows = list(_tool_rows(seq, "tool_finished", data.tool, target, data, head + data.text))
        yield from rows
        if read_artifact is None or not data.full_output:
            return
        try:
            output = read_artifact(data.full_output)[:MAX_OUTPUT_CHARS]
        except Exception:  # a missing artifact leaves the preview indexed, nothing more
            return
        yield from _tool_rows(seq, "tool_output", data.tool, target, data, output, len(rows))

    def _target(self, call_id: str) -> str:
        assert self._db is not None
        found = self._db.execute(
            "SELECT target FROM pages WHERE call_id=? AND kind='tool_started' LIMIT 1", (call_id,)
        ).fetchone()
        return str(found[0]) if found else ""

    # --- reading -------------------------------------------------------------------

    def search(self, query: str, limit: int = 5) -> list[Page]:
        """Best-matching pages for the words of `query` (all words first, then any word)."""
        terms = query_terms(query)
        if not terms:
            return []
        found = self._match(terms, "AND", 2**62, max(1, limit))
        return found or self._match(terms, "OR", 2**62, max(1, limit))

    def page(self, seq: int) -> list[Page]:
        """Every page indexed for the record at `seq`."""
        return self._select(
            f"SELECT {COLUMNS} FROM pages p WHERE p.seq = ? ORDER BY p.part, p.id", (seq,)
        )

    def relevant(
        self, intent_text: str, exclude_through: int | None = None, limit: int = 2
    ) -> list[Page]:
        """Older non-user pages matching the intent; pages at or after seq `exclude_through`
        are left out (they are in the working set). Never raises: a broken index gives []."""
        terms = query_terms(intent_text)
        if not terms or limit <= 0:
            return []
        key = (tuple(terms), exclude_through, limit)
        if self._ensure() and key in self._answers:  # _ensure drops answers on a new file
            return list(self._answers[key])
        try:
            bound = self._first_id(exclude_through)
            found = self._match(terms, "OR", bound, limit, skip_user=True)
        except RecallError:
            return []
        if len(self._answers) >= MAX_ANSWERS:
            self._answers.clear()
        self._answers[key] = found
        return list(found)

    def _first_id(self, seq: int | None) -> int:
        """The smallest page id at or after `seq` (ids grow with seq: pages go in in order)."""
        if seq is None:
            return 2**62
        rows = self._rows("SELECT id FROM pages WHERE seq >= ? ORDER BY seq, id LIMIT 1", (seq,))
        return int(rows[0][0]) if rows else 2**62

    def _match(
        self, terms: list[str], mode: str, below_id: int, limit: int, skip_user: bool = False
    ) -> list[Page]:
        counts = self._pages_with(terms)
        known = sorted((n, t) for t, n in counts.items() if n)
        if mode == "AND" and len(known) < len(terms):
            return []
        chosen, total = [], 0
        for n, term in known:
            if (mode == "OR" and total + n > RANKED_MATCHES) or n > RANKED_MATCHES:
                break
            chosen.append(term)
            total += n
        ranked = bool(chosen)
        if not chosen:  # only very common words: newest matches first, found without ranking
            chosen = [t for _, t in known] if mode == "AND" else [t for _, t in known[:1]]
        if not chosen:
            return []
        order = "rank" if ranked else "rowid DESC"
        kind = "AND kind != 'user' " if skip_user else ""
        ids = self._rows(
            f"SELECT rowid FROM pages_fts WHERE pages_fts MATCH ? AND rowid < ? {kind}"
            f"ORDER BY {order} LIMIT ?",
            (fts_query(chosen, mode), below_id, limit),
        )
        return self._by_ids([int(r[0]) for r in ids])

    def _pages_with(self, terms: list[str]) -> dict[str, int]:
        marks = ",".join("?" * len(terms))
        rows = self._rows(f"SELECT term, docs FROM terms WHERE term IN ({marks})", terms)
        found = {str(term): int(docs) for term, docs in rows}
        return {term: found.get(term, 0) for term in terms}

    def _by_ids(self, ids: list[int]) -> list[Page]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        found = self._rows(f"SELECT p.id, {COLUMNS} FROM pages p WHERE p.id IN ({marks})", ids)
        by_id = {row[0]: Page(*row[1:]) for row in found}
        return [by_id[i] for i in ids if i in by_id]

    def _select(self, sql: str, params: tuple[Any, ...]) -> list[Page]:
        return [Page(*row) for row in self._rows(sql, params)]

    def _rows(self, sql: str, params: tuple[Any, ...] | list[Any]) -> list[Any]:
        if not self._ensure() or self._db is None:
            raise RecallError(f"the recall index is unavailable ({self.problem or 'not open'})")
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self.problem = f"{type(exc).__name__}: {exc}"
            raise RecallError(f"the recall index could not be searched: {exc}") from exc


def _rows(
    seq: int, kind: str, tool: str, target: str, call_id: str, provenance: str, text: str
) -> Iterator[tuple[Any, ...]]:
    target = target[:TARGET_CHARS]
    for part, body in enumerate(split_pages(text)):
        yield (seq, part, kind, tool, target, call_id, provenance, body)


def _tool_rows(
    seq: int, kind: str, tool: str, target: str, data: Any, text: str, first: int = 0
) -> Iterator[tuple[Any, ...]]:
    target = target[:TARGET_CHARS]
    for part, body in enumerate(split_pages(text), start=first):
        yield (seq, part, kind, tool, target, data.call_id, PROVENANCE["tool"], body)
