"""Fitting the working set into a byte budget: archive at pressure, omit, then collapse rows.

Sizes are computed as upper bounds (a body never renders longer than its limit), so the
rendered text is never longer than the size the fitter accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kernel.context.render import excerpt, mark, nbytes, row
from kernel.context.state import Call, Chunk

ARCHIVE_STEP = 8  # working calls archived per step once the pressure mark is passed
MIN_BODY = 512  # bodies keep this much before older archive rows are collapsed


@dataclass
class Block:
    """A head line with an optional body excerpt; the fitter lowers `limit`."""

    head: str
    text: str = ""
    pointer: str = ""
    limit: int = 0
    head_bytes: int = field(init=False)
    text_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.head_bytes = nbytes(self.head)
        self.text_bytes = nbytes(self.text)

    def body_bytes(self) -> int:
        return min(self.text_bytes, self.limit) if self.text and self.limit > 0 else 0

    def size(self) -> int:
        body = self.body_bytes()
        return self.head_bytes + (1 + body if body else 0)

    def render(self) -> str:
        body = excerpt(self.text, self.limit, self.pointer) if self.body_bytes() else ""
        return f"{self.head}\n{body}" if body else self.head


@dataclass
class Section:
    """A titled list of blocks; empty sections are left out of the text."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    def size(self) -> int:
        if not self.blocks:
            return 0
        return nbytes(self.title) + sum(1 + b.size() for b in self.blocks) + 2

    def render(self) -> str:
        return "\n".join([self.title, *(b.render() for b in self.blocks)])


@dataclass
class Archive:
    """Archived rows: checkpoint chunks, then working calls archived by this projection."""

    chunks: list[Chunk]
    calls: list[Call] = field(default_factory=list)
    title: str = "== ARCHIVED EXECUTION (factual rows, oldest first; full records via recall) =="
    shown: list[str] = field(default_factory=list)
    chunk_rows: int = field(init=False)
    chunk_ok: int = field(init=False)

    def __post_init__(self) -> None:
        # Once per projection: the chunks come from the checkpoint and never change here.
        self.chunk_rows = sum(len(c.marks) for c in self.chunks)  # one letter a row
        self.chunk_ok = sum(c.marks.count("o") for c in self.chunks)

    def total(self) -> int:
        return self.chunk_rows + len(self.calls)

    def iter_newest(self) -> Iterator[tuple[str, str]]:
        """Rows newest first, lazily: only the shown ones are ever rendered."""
        for call in reversed(self.calls):
            yield row(call), mark(call)
        for chunk in reversed(self.chunks):
            yield from zip(reversed(chunk.texts()), reversed(chunk.marks), strict=False)

    def counts(self) -> tuple[int, int]:
        ok = self.chunk_ok + sum(1 for c in self.calls if c.status == "ok")
        return ok, self.total() - ok

    def first_seq(self) -> int:
        if self.chunks:
            return self.chunks[0].first_seq
        return self.calls[0].seq if self.calls else 0

    def summary_line(self, hidden: int, ok: int, last_seq: int) -> str:
        return (
            f"[archive: {hidden:,} earlier calls not shown (seq {self.first_seq():,} to "
            f"{last_seq:,}): {ok:,} ok, {hidden - ok:,} error; the recall tool searches them]"
        )

    def fit(self, space: int, through: int) -> int:
        """Choose the newest rows that fit in `space` bytes; returns the bytes used."""
        total = self.total()
        if total == 0:
            return 0
        ok_all, _ = self.counts()
        reserve = nbytes(self.summary_line(total, ok_all, max(through, 1)))
        used = nbytes(self.title) + 2 + 1 + reserve
        if used > space:
            self.shown = []
            return 0
        shown: list[str] = []
        ok_shown = 0
        for text, letter in self.iter_newest():
            size = nbytes(text) + 1
            if used + size > space:
                break
            used += size
            shown.append(text)
            ok_shown += letter == "o"
        shown.reverse()
        hidden = total - len(shown)
        lines = [self.title]
        if hidden:
            last = _seq_of(shown[0]) - 1 if shown else through
            lines.append(self.summary_line(hidden, ok_all - ok_shown, max(last, 1)))
        self.shown = lines + shown
        return nbytes("\n".join(self.shown)) + 2

    def render(self) -> str:
        return "\n".join(self.shown)


def _seq_of(text: str) -> int:
    try:
        return int(text[1 : text.index(" ")])
    except ValueError:
        return 0


def water_fill(blocks: list[Block], avail: int) -> int:
    """The largest body limit so that all bodies together take at most `avail` bytes."""
    sizes = sorted(min(b.text_bytes, b.limit) for b in blocks if b.body_bytes())
    if not sizes:
        return 0
    used = 0
    for i, size in enumerate(sizes):
        remaining = len(sizes) - i
        if used + (size + 1) * remaining <= avail:
            used += size + 1
            continue
        return max(0, (avail - used) // remaining - 1)
    return sizes[-1]


def set_limit(blocks: list[Block], cap: int) -> None:
    """Lower every body limit to at most `cap` (0 leaves the head row only)."""
    for block in blocks:
        block.limit = min(block.limit, cap)
