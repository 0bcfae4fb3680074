"""The evidence store: captured texts, their bounded windows, passages and passage pages.

Captures live in process memory only: a new process cannot resume an old store. A reference
(`c1`, `c2`, ...) names one capture; capturing the same text twice gives two references.

Three ways to cut a capture, all computed in code from the text alone:
- windows (`read_evidence`): 1,200 characters starting every 600, so any passage of at most 600
  characters lies wholly inside at least one window;
- passages (`record_evidence`): paragraphs split at line ends and spaces into spans of at most
  600 characters, trimmed of surrounding whitespace;
- pages (`evidence_page`): consecutive whole passages, at most 1,200 characters per page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jev_harness.model import Option
from jev_harness.text import MAX_WINDOW_CHARS, clean, clip, opening

MAX_PASSAGE_CHARS = 600
WINDOW_STEP = MAX_WINDOW_CHARS - MAX_PASSAGE_CHARS
MAX_CAPTURE_CHARS = 8_000_000  # providers cut long before this; a bigger put is a bug


class UnknownReference(KeyError):
    """A reference that names no capture of this store."""


@dataclass(frozen=True)
class Passage:
    """A span [start, end) of one capture: a candidate quote for a record."""

    ref: str
    index: int
    start: int
    end: int


@dataclass
class Capture:
    ref: str
    text: str
    source: str
    digest: str
    summary: str
    metadata: dict[str, Any]
    _passages: list[Passage] | None = field(default=None, repr=False)


class EvidenceStore:
    """Captured texts by reference; every read is an original-text window of <= 1,200 chars."""

    def __init__(self) -> None:
        self._captures: dict[str, Capture] = {}

    def __len__(self) -> int:
        return len(self._captures)

    def __contains__(self, ref: object) -> bool:
        return ref in self._captures

    def __iter__(self) -> Iterator[str]:
        return iter(self._captures)

    def put(self, text: str, source: str, metadata: dict[str, Any] | None = None) -> str:
        """Capture `text` from `source`; returns a new reference."""
        if not isinstance(text, str):
            raise TypeError(f"a capture is text, not {type(text).__name__}")
        if len(text) > MAX_CAPTURE_CHARS:
            raise ValueError(f"a capture is at most {MAX_CAPTURE_CHARS} characters")
        text, source = clean(text), clip(str(source), 500)
        ref = f"c{len(self._captures) + 1}"
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        summary = clip(f"{source} ({len(text)} chars): {opening(text, 120)}")
        self._captures[ref] = Capture(ref, text, source, digest, summary, dict(metadata or {}))
        return ref

    def _get(self, ref: str) -> Capture:
        try:
            return self._captures[ref]
        except (KeyError, TypeError):
            raise UnknownReference(f"no capture {ref!r}") from None

    def describe(self, ref: str) -> dict[str, Any]:
        """Source, length, digest (sha256 of the text), summary and metadata of a capture."""
        cap = self._get(ref)
        return {
            "ref": ref,
            "source": cap.source,
            "length": len(cap.text),
            "digest": cap.digest,
            "summary": cap.summary,
            "metadata": dict(cap.metadata),
        }

    def references(self) -> list[dict[str, Any]]:
        """Every capture's description, oldest first."""
        return [self.describe(ref) for ref in self._captures]

    def read(self, ref: str, offset: int = 0, limit: int = MAX_WINDOW_CHARS) -> str:
        """The original text [offset, offset + limit); a limit above 1,200 is an error."""
        if not isinstance(limit, int) or not 0 <= limit <= MAX_WINDOW_CHARS:
            raise ValueError(f"limit must be 0..{MAX_WINDOW_CHARS} characters, not {limit!r}")
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative integer, not {offset!r}")
        return self._get(ref).text[offset : offset + limit]

    def text(self, passage: Passage) -> str:
        """The full text of a passage (at most 600 characters)."""
        return self._get(passage.ref).text[passage.start : passage.end]

    def windows(self, ref: str) -> list[tuple[int, int]]:
        """Window spans of a capture: 1,200 characters every 600; one for a short text."""
        length = len(self._get(ref).text)
        spans = [(0, min(length, MAX_WINDOW_CHARS))]
        start = WINDOW_STEP
        while spans[-1][1] < length:
            spans.append((start, min(length, start + MAX_WINDOW_CHARS)))
            start += WINDOW_STEP
        return spans

    def passages(self, ref: str) -> list[Passage]:
        """The passages of a capture, in text order (computed once)."""
        cap = self._get(ref)
        if cap._passages is None:
            cap._passages = [
                Passage(ref, i, s, e) for i, (s, e) in enumerate(split_passages(cap.text))
            ]
        return cap._passages

    def pages(self, ref: str) -> list[tuple[int, int]]:
        """Page spans: consecutive whole passages, at most 1,200 characters each."""
        spans: list[tuple[int, int]] = []
        for passage in self.passages(ref):
            if spans and passage.end - spans[-1][0] <= MAX_WINDOW_CHARS:
                spans[-1] = (spans[-1][0], passage.end)
            else:
                spans.append((passage.start, passage.end))
        return spans

    def chunk_options(self, ref: str | None = None) -> list[Option]:
        """Passage candidates (of one capture, or all) as options; `value` is the Passage."""
        refs = [ref] if ref is not None else list(self._captures)
        return [self.passage_option(p) for r in refs for p in self.passages(r)]

    def passage_option(self, passage: Passage) -> Option:
        cap = self._get(passage.ref)
        words = opening(cap.text[passage.start : passage.end], 120)
        description = f"{cap.source} @{passage.start}: {words}"
        return Option(f"{passage.ref}.p{passage.index + 1}", description, passage)


def split_passages(text: str) -> list[tuple[int, int]]:
    """Spans of at most 600 characters: whole paragraphs where they fit, else lines or words."""
    spans: list[tuple[int, int]] = []
    for line_start, line_end in _lines(text):
        for start, end in _pieces(text, line_start, line_end):
            joinable = spans and _same_paragraph(text, spans[-1][1], start)
            if joinable and end - spans[-1][0] <= MAX_PASSAGE_CHARS:
                spans[-1] = (spans[-1][0], end)
                continue
            spans.append((start, end))
    return spans


def _same_paragraph(text: str, end: int, start: int) -> bool:
    return "\n\n" not in text[end:start].replace("\r", "").replace(" ", "").replace("\t", "")


def _lines(text: str) -> Iterator[tuple[int, int]]:
    """Trimmed spans of non-blank lines, one per line (merged later within a paragraph)."""
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped:
            start = pos + line.index(stripped[0])
            yield start, start + len(stripped)
        pos += len(line)


def _pieces(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Cut [start, end) at spaces (or hard, for a long word) into spans of <= 600 chars."""
    while end - start > MAX_PASSAGE_CHARS:
        cut = text.rfind(" ", start + 1, start + MAX_PASSAGE_CHARS + 1)
        cut = cut if cut > start else start + MAX_PASSAGE_CHARS
        piece_end = cut
        while piece_end > start and text[piece_end - 1].isspace():
            piece_end -= 1
        yield start, piece_end
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        yield start, end
