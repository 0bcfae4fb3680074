"""Reading the recall index: search by words, page by seq, and the intent's relevant pages.

Terms are used rarest first while the pages they match stay under RANKED_MATCHES; a query of
only very common words is answered newest first. Words are quoted, never parsed as FTS5
syntax. The explicit `recall` tool gets a RecallError; `relevant` (context building) never
raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.errors import JmpError

if TYPE_CHECKING:
    import sqlite3  # imported where a search runs: a new session's first request needs none

WORD = re.compile(r"\w+")
MAX_TERMS = 16
# Ranking cost grows with the number of matching pages; terms are used rarest first while
# the pages they match stay under this, and a query of only very common words is answered
# newest first instead (FTS5 stops early on rowid order). Keeps p95 low at 100k pages.
# Page counts per word live in our own `terms` table: fts5vocab counts by reading doclists.
RANKED_MATCHES = 2000
MAX_ANSWERS = 16  # relevant() answers kept until the next pages arrive
COLUMNS = "p.seq, p.part, p.kind, p.tool, p.target, p.provenance, p.body"


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


class RecallSearch:
    """The reading half of RecallIndex (kernel/context/recall/index.py), which owns the file."""

    _db: sqlite3.Connection | None
    _answers: dict[tuple[Any, ...], list[Page]]
    problem: str

    def _ensure(self) -> bool:
        raise NotImplementedError  # RecallIndex: a usable connection, reopened when replaced

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
        import sqlite3  # loaded already: the index that owns `_db` opened it

        if not self._ensure() or self._db is None:
            raise RecallError(f"the recall index is unavailable ({self.problem or 'not open'})")
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self.problem = f"{type(exc).__name__}: {exc}"
            raise RecallError(f"the recall index could not be searched: {exc}") from exc
