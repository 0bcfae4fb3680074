"""The read-only `recall` tool: search (query) or page (seq) the session's own history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernel.context.recall.search import Page, RecallError
from protocol.catalog import RECALL, is_snapshot

if TYPE_CHECKING:  # the index (SQLite) is opened by its owner, the context view, when needed
    from kernel.context.recall.index import RecallIndex

RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": RECALL.description,
    "properties": {
        "query": {"type": "string", "description": "Words to search for in the history."},
        "seq": {"type": "integer", "minimum": 1, "description": "A record's seq to page."},
    },
    "additionalProperties": False,
}
SEARCH_LIMIT = 5


def run_recall(index: RecallIndex, arguments: dict[str, Any]) -> str:
    """The `recall` tool's result text; raises RecallError on bad arguments or a broken index."""
    query, seq = recall_arguments(arguments)
    parts: list[str] = []
    if seq is not None:
        pages = index.page(seq)
        parts.append(_listing(f"record #{seq}", pages))
    if query is not None:
        pages = index.search(query, SEARCH_LIMIT)
        parts.append(_listing(f"search {query!r}", pages))
    return "\n\n".join(parts)


def recall_arguments(arguments: Any) -> tuple[str | None, int | None]:
    """Check `recall` arguments before the call is recorded; raises RecallError."""
    if not isinstance(arguments, dict):
        raise RecallError("recall takes an object with `query` or `seq`")
    unknown = sorted(set(arguments) - {"query", "seq"})
    if unknown:
        raise RecallError(f"recall does not take {', '.join(unknown)}: use `query` or `seq`")
    query, seq = arguments.get("query"), arguments.get("seq")
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise RecallError("recall `query` must be a non-empty string")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
        raise RecallError("recall `seq` must be a positive integer")
    if query is None and seq is None:
        raise RecallError("recall needs `query` (words to search) or `seq` (a record to page)")
    return query, seq


def _listing(what: str, pages: list[Page]) -> str:
    if not pages:
        return f"RECALL {what}: nothing found in this session's history."
    lines = [f"RECALL {what}: {len(pages)} page(s); records of the past, not current state."]
    for page in pages:
        label = f"{page.tool} {page.target}".strip() if page.tool else page.kind
        note = " (old file content; not current)" if is_snapshot(page.tool) else ""
        lines.append(f"--- #{page.seq} part {page.part}, {page.provenance}: {label}{note}")
        lines.append(page.text)
    return "\n".join(lines)
