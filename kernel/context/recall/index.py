"""The recall index: SQLite FTS5 over the session's own history (`memory.sqlite3`).

A disposable cache: a missing, foreign or corrupt file is deleted and rebuilt from the log, and
so is one that does not match the log: it keeps the digest of the last record it indexed, and
the first sync of each connection compares it with the log's record at that seq (the cache
syncs on its own schedule, so after a power cut it can be ahead of the recovered log, or hold
records whose seqs the log has since given to others).
Ordinary context building never sees an exception from here; only the explicit `recall` tool
gets a RecallError. This module owns the file (open, rebuild, incremental sync in one
transaction); what a record's pages hold is kernel/context/recall/pages.py, and reading
(search, page, relevant) is kernel/context/recall/search.py.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel.context.recall.pages import INDEXED, ReadArtifact, record_pages
from kernel.context.recall.search import Page, RecallSearch, query_terms
from kernel.context.state import events_after
from kernel.store.event_log import record_digest
from kernel.store.guard import NOFOLLOW
from kernel.store.modes import FILE_MODE
from protocol.events import Event

SCHEMA_VERSION = "1"
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


class RecallIndex(RecallSearch):
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
        # Created here 0600 first: SQLite would make it 0644 (less the umask), and it gives
        # its -wal, -shm and -journal files the database file's mode (kernel/store/modes.py).
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW, FILE_MODE))
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

    def sync(self, events: Sequence[Event], read_artifact: ReadArtifact | None = None) -> int:
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

    def _stored(self) -> tuple[str | None, int, str]:
        """The session id, last seq and that record's digest the file says it has indexed."""
        assert self._db is not None
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        return meta.get("session_id"), int(meta.get("through") or 0), meta.get("digest", "")

    def _nothing_new(self, events: Sequence[Event], session_id: str, last: int) -> bool:
        """Only unindexed kinds (routes, usage...) since this connection's last sync: no SQL."""
        known = self._known
        if self._db is None or known is None or known[0] != session_id or known[1] > last:
            return False
        return not any(isinstance(e.data, INDEXED) for e in events_after(events, known[1]))

    def _sync(self, events: Sequence[Event], read_artifact: ReadArtifact | None) -> int:
        if not events:
            return 0
        session_id, last = events[0].session_id, events[-1].seq or 0
        if self._nothing_new(events, session_id, last):
            # The file's `through` may lag: the events in between yield no pages when redone.
            self._known = (session_id, last)
            return 0
        stored, through, digest = self._stored()
        mismatch = through > 0 and (not digest or digest != record_digest(events, through))
        if stored not in (None, session_id) or mismatch:
            self.rebuild()  # foreign, newer than the log, or of records the log no longer has
            through = 0
        assert self._db is not None
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            fresh = events_after(events, through)
            pages = list(record_pages(fresh, read_artifact, self._target))
            if pages:
                self._insert(pages)
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [
                    ("session_id", session_id),
                    ("through", str(last)),
                    ("digest", record_digest(events, last)),
                ],
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

    def _target(self, call_id: str) -> str:
        assert self._db is not None
        found = self._db.execute(
            "SELECT target FROM pages WHERE call_id=? AND kind='tool_started' LIMIT 1", (call_id,)
        ).fetchone()
        return str(found[0]) if found else ""
