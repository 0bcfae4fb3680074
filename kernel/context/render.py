"""Projection text pieces: UTF-8 sizes and cuts, factual rows, excerpts with omission markers."""

from __future__ import annotations

from collections.abc import Callable

from kernel.context.state import CHUNK_ROWS, Call, Chunk, State, archivable

ReadArtifact = Callable[[str], str]
TARGET_BYTES = 240  # a target longer than this (a long shell command) is cut in rows
NOTE_BYTES = 400


def nbytes(text: str) -> int:
    """UTF-8 length; the budget unit."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def cut_head(text: str, limit: int) -> str:
    """The longest prefix of at most `limit` UTF-8 bytes, cut on a character boundary."""
    if limit <= 0:
        return ""
    if nbytes(text) <= limit:
        return text
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def cut_tail(text: str, limit: int) -> str:
    """The longest suffix of at most `limit` UTF-8 bytes, cut on a character boundary."""
    if limit <= 0:
        return ""
    if nbytes(text) <= limit:
        return text
    return text.encode("utf-8")[-limit:].decode("utf-8", errors="ignore")


def omission(omitted: int, pointer: str) -> str:
    """The explicit marker that stands for bytes left out of a projection."""
    where = f"; full output: {pointer}" if pointer else ""
    return f"[… {omitted:,} bytes omitted{where} …]"


def excerpt(text: str, limit: int, pointer: str) -> str:
    """`text` if it fits in `limit` bytes, else head + omission marker + tail (tail favoured)."""
    size = nbytes(text)
    if size <= limit:
        return text
    marker = omission(size, pointer)
    room = limit - nbytes(marker) - 2
    if room <= 0:
        return marker if nbytes(marker) <= limit else ""
    # The marker's number may shrink once head and tail are known: size it with the total.
    head = cut_head(text, room // 3)
    tail = cut_tail(text, room - nbytes(head))
    marker = omission(size - nbytes(head) - nbytes(tail), pointer)
    return f"{head}\n{marker}\n{tail}"


def short(text: str, limit: int) -> str:
    """A one-line field, cut with an ellipsis when longer than `limit` bytes."""
    flat = " ".join(text.split())
    return flat if nbytes(flat) <= limit else cut_head(flat, limit - 3) + "…"


def pointer(call: Call) -> str:
    """Where the complete record lives: the output artifact, the result, or a recall seq."""
    return call.full_output or call.artifact or call.request or f"recall seq {call.seq}"


def outcome(call: Call) -> str:
    """Status words for a row; an uncertain call is never reported as done or failed."""
    if call.status == "uncertain":
        ack = "acknowledged" if call.acknowledged else "NOT acknowledged"
        note = f"; note: {short(call.note, NOTE_BYTES)}" if call.note else ""
        return f"outcome unknown; not re-run (cause {call.cause}, {ack}){note}"
    if call.status == "pending":
        return "pending: started, no result recorded"
    code = "" if call.exit_code is None else f", exit code {call.exit_code}"
    if call.stopped:
        code += f" (command stopped: {call.stopped}, not success)"
    elif call.exit_code == -1:
        code += " (command still running when recorded, not success)"
    return f"{call.status}{code}"


def row(call: Call) -> str:
    """One factual row: seq, tool, target, status, exit code and the archive pointer."""
    target = short(call.target, TARGET_BYTES) if call.target else "-"
    span = f" lines {call.view_range}" if call.view_range else ""
    return f"#{call.seq} {call.tool} {target}{span} → {outcome(call)} [{pointer(call)}]"


def body_source(call: Call, read_artifact: ReadArtifact | None) -> str:
    """A call's result text: the full output when readable, else the preview."""
    text = call.preview
    if read_artifact is not None and call.full_output:
        try:
            text = read_artifact(call.full_output)
        except Exception as exc:  # a missing artifact must not stop context building
            text = f"{call.preview}\n[full output unreadable: {type(exc).__name__}]"
        if not text and call.preview:  # output artifacts are not fsynced: a power loss empties
            text = f"{call.preview}\n[full output artifact is empty]"
    if call.error and call.error not in text:
        text = f"error: {call.error}\n{text}" if text else f"error: {call.error}"
    return text


def archive_calls(state: State, keep: int) -> int:
    """Move finished calls older than the latest `keep` into archive chunks; returns the count."""
    cut = max(0, len(state.calls) - keep)
    moved = [c for c in state.calls[:cut] if archivable(c)]
    state.calls = [c for c in state.calls[:cut] if not archivable(c)] + state.calls[cut:]
    append_rows(state.chunks, moved)
    state.archived += len(moved)
    return len(moved)


def append_rows(chunks: list[Chunk], calls: list[Call]) -> None:
    """Add the calls' rows to the last chunk, opening a new chunk every CHUNK_ROWS rows (each
    chunk's encoded rows rewritten once)."""
    start = 0
    while start < len(calls):
        if not chunks or len(chunks[-1].marks) >= CHUNK_ROWS:
            chunks.append(Chunk(first_seq=calls[start].seq, last_seq=calls[start].seq))
        chunk = chunks[-1]
        batch = calls[start : start + CHUNK_ROWS - len(chunk.marks)]
        chunk.add([row(c) for c in batch], "".join(mark(c) for c in batch))
        chunk.last_seq = max(chunk.last_seq, *(c.seq for c in batch))
        chunk.first_seq = min(chunk.first_seq, *(c.seq for c in batch))
        start += len(batch)


def mark(call: Call) -> str:
    """The one-letter status of an archived row."""
    return "o" if call.status == "ok" else "e"
