"""What the recall index holds: which records are indexed and how each becomes pages.

User requests, finals, tool records (with full outputs up to MAX_OUTPUT_CHARS) and errors are
split into overlapping pages, each with seq, kind, tool, a bounded target and its typed
provenance. Pure: no I/O but the artifact reader it is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from protocol.events import (
    ErrorData,
    Event,
    FinalData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

PAGE_CHARS = 2048
OVERLAP_CHARS = 256
MAX_OUTPUT_CHARS = 1_000_000  # outputs beyond this are indexed up to here (the artifact keeps all)
# The target column is repeated on every page of a record: bounded, so that indexing stays
# linear in the text (a 10 MB command copied onto each 2 KB page was quadratic; issue 9).
TARGET_CHARS = 256
PROVENANCE = {
    "user": "user instruction",
    "final": "assistant conversation",
    "tool": "historical effect",
}
INDEXED = (UserData, FinalData, ToolStartedData, ToolFinishedData, ToolUncertainData, ErrorData)
ReadArtifact = Callable[[str], str]


def split_pages(text: str, size: int = PAGE_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Overlapping pages of `size` characters; each starts `overlap` before the previous end."""
    if len(text) <= size:
        return [text] if text else []
    step = size - overlap
    return [text[i : i + size] for i in range(0, len(text) - overlap, step)]


def record_pages(
    events: Sequence[Event], read_artifact: ReadArtifact | None, target_of: Callable[[str], str]
) -> Iterator[tuple[Any, ...]]:
    """Rows for `pages`: (seq, part, kind, tool, target, call_id, provenance, body).

    `target_of(call_id)` finds the target of a call started before `events` (already indexed).
    """
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
            target = data.target or targets.get(data.call_id) or target_of(data.call_id)
            yield from _finished(seq, data, target, read_artifact)
        elif isinstance(data, ToolUncertainData):
            target = data.target or targets.get(data.call_id) or target_of(data.call_id)
            text = f"outcome unknown; not re-run ({data.cause}): {data.note}"
            yield from _tool_rows(seq, "tool_uncertain", data.tool, target, data, text)
        elif isinstance(data, ErrorData):
            text = f"error in {data.stage}: {data.error_class}: {data.message}"
            yield from _rows(seq, "error", "", "", "", PROVENANCE["tool"], text)


def _finished(
    seq: int, data: ToolFinishedData, target: str, read_artifact: ReadArtifact | None
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
