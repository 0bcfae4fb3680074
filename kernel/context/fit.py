"""The fitter: from a folded state to a projection text that fits its byte budget.

Order of degradation: archive older calls at the pressure mark (chunk by chunk), cut bodies
with omission markers, collapse older archive rows into a counted line, then drop optional
sections. Pinned intent was checked by the caller and is never touched here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.context.layout import (
    ARCHIVE_STEP,
    MIN_BODY,
    Archive,
    Block,
    Section,
    set_limit,
    water_fill,
)
from kernel.context.render import body_source, nbytes, row, short
from kernel.context.state import Call, State, archivable
from protocol.catalog import is_snapshot

if TYPE_CHECKING:
    from kernel.context.policy import ContextPolicy, Pinned

RECENT_TITLE = "== RECENT EXECUTION (tool calls, oldest first; outputs are excerpts) =="
SNAPSHOT_TITLE = (
    "== READ SNAPSHOTS (file observations as of the seq shown; no later action touched them) =="
)
FACTS_TITLE = "== FACTS (errors and unsettled calls, as recorded) =="
RECALL_TITLE = (
    "== OLDER HISTORY FROM RECALL (intent-relevant records of the past, not current state) =="
)
MIN_RECALL_BODY = 200
RECALL_PAGE_BYTES = 1500


@dataclass
class Parts:
    """Inputs of one fit."""

    state: State
    pinned: Pinned
    budget: int
    read_artifact: Callable[[str], str] | None
    recall: Any
    policy: ContextPolicy


@dataclass
class Working:
    """The variable sections while they are being fitted."""

    fixed: int  # pinned bytes
    older: list[Block]  # whole older calls, oldest first (archivable)
    older_calls: list[Call]
    recent_calls: list[Call]
    recent: Section
    snapshots: Section
    facts: Section
    archive: Archive

    def blocks(self) -> list[Block]:
        return self.older + self.recent.blocks + self.snapshots.blocks

    def size(self) -> int:
        recent = Section(self.recent.title, self.older + self.recent.blocks)
        return self.fixed + recent.size() + self.snapshots.size() + self.facts.size()

    def archive_older(self, count: int) -> None:
        """Turn the oldest `count` whole calls into archive rows."""
        self.archive.calls.extend(self.older_calls[:count])
        del self.older_calls[:count]
        del self.older[:count]


def snapshot_label(call: Call) -> str:
    return f"[read snapshot: observation as of seq {call.end_seq or call.seq}] "


def build(parts: Parts) -> Working:
    """Blocks for every working call, with bodies capped at a quarter of the budget."""
    state, policy, budget = parts.state, parts.policy, parts.budget
    cap = max(MIN_BODY, budget // 4)
    keep = max(0, policy.keep_whole)
    recent_calls = state.calls[len(state.calls) - keep :] if keep else []
    older = state.calls[: len(state.calls) - len(recent_calls)]
    live = {c.call_id for c in state.snapshots}
    recent = Section(RECENT_TITLE)
    for call in recent_calls:
        label = snapshot_label(call) if call.call_id in live else ""
        text = body_source(call, parts.read_artifact)
        recent.blocks.append(Block(label + row(call), text, _ptr(call), cap))
    shown = {c.call_id for c in recent_calls}
    snapshots = Section(SNAPSHOT_TITLE)
    for call in state.snapshots:
        if call.call_id not in shown:
            text = body_source(call, parts.read_artifact)
            snapshots.blocks.append(Block(snapshot_label(call) + row(call), text, _ptr(call), cap))
    facts = Section(FACTS_TITLE, [Block(fact) for fact in fact_rows(state, older)])
    working = Working(
        fixed=_pinned_bytes(parts.pinned),
        older=[],
        older_calls=[],
        recent_calls=recent_calls,
        recent=recent,
        snapshots=snapshots,
        facts=facts,
        archive=Archive(chunks=state.chunks),
    )
    _add_older(working, [c for c in older if archivable(c)], policy.pressure * budget, cap)
    return working


def _add_older(working: Working, older: list[Call], mark: float, cap: int) -> None:
    """Older calls whole, newest first, while under the pressure mark; the rest archived."""
    room = mark - working.size()
    split = len(older)
    while split > 0 and room > 0:
        call = older[split - 1]
        block = Block(row(call), body_source(call, None), _ptr(call), cap)
        room -= block.size() + 1
        working.older.insert(0, block)
        split -= 1
    working.archive.calls.extend(older[:split])
    working.older_calls = older[split:]


def fact_rows(state: State, older: list[Call]) -> list[str]:
    """Errors and unsettled older calls; unacknowledged uncertainty is pinned in the status."""
    rows = [
        row(c)
        for c in older
        if c.status == "pending" or (c.status, c.acknowledged) == ("uncertain", True)
    ]
    if state.errors_dropped:
        rows.append(f"[{state.errors_dropped:,} earlier error records not shown]")
    for fact in state.errors:
        text = short(f"{fact.error_class}: {fact.message}", 600)
        rows.append(f"#{fact.seq} error in stage {fact.stage}: {text}")
    return rows


def fit(parts: Parts) -> tuple[str, int]:
    """Render the projection within the budget; returns (text, archived call count)."""
    working = build(parts)
    budget = parts.budget
    _relieve_pressure(working, parts.policy.pressure * budget)
    _shrink_bodies(working, budget)
    _degrade(working, budget)
    archive_bytes = working.archive.fit(budget - working.size(), parts.state.through)
    recall = _recall_section(parts, working, budget - working.size() - archive_bytes)
    pinned = parts.pinned
    sections = [pinned.head, working.archive.render() if archive_bytes else ""]
    sections += [recall.render() if recall.blocks else ""]
    for section in (working.facts, working.snapshots):
        sections.append(section.render() if section.blocks else "")
    recent = Section(working.recent.title, working.older + working.recent.blocks)
    sections += [recent.render() if recent.blocks else "", pinned.status, pinned.current]
    text = "\n\n".join(s for s in sections if s)
    if nbytes(text) > budget:  # cannot happen when sizes are right; never break the budget
        text = "\n\n".join([pinned.head, pinned.status, pinned.current])
    return text, parts.state.archived + len(working.archive.calls)


def _relieve_pressure(working: Working, mark: float) -> None:
    """Past the pressure mark, archive the oldest whole calls a chunk at a time."""
    total = working.size()
    while total > mark and working.older:
        step = min(ARCHIVE_STEP, len(working.older))
        total -= sum(b.size() + 1 for b in working.older[:step])
        working.archive_older(step)


def _archive_floor(working: Working) -> int:
    archive = working.archive
    if not archive.total():
        return 0
    return nbytes(archive.title) + 200


def _shrink_bodies(working: Working, budget: int) -> None:
    """Cut bodies (omission markers) so everything fits, keeping some room for archive rows."""
    blocks = working.blocks()
    bodies = sum(1 + b.body_bytes() for b in blocks if b.body_bytes())
    heads = working.size() - bodies + _archive_floor(working)
    rows_room = min(budget // 5, 120 * working.archive.total())
    cap = water_fill(blocks, budget - heads - rows_room)
    if cap < MIN_BODY:
        cap = water_fill(blocks, budget - heads)
    set_limit(blocks, cap)


def _degrade(working: Working, budget: int) -> None:
    """When even rows do not fit: archive all older calls, then drop optional sections."""
    steps: list[Callable[[], None]] = [
        lambda: working.archive_older(len(working.older)),
        lambda: working.snapshots.blocks.clear(),
        lambda: working.facts.blocks.clear(),
        lambda: set_limit(working.recent.blocks, 0),
        lambda: working.recent.blocks.__delitem__(slice(0, -1)),
        lambda: working.recent.blocks.clear(),
    ]
    for step in steps:
        if working.size() + _archive_floor(working) <= budget:
            return
        step()


def _recall_section(parts: Parts, working: Working, room: int) -> Section:
    """Up to `recall_pages` intent-relevant older pages, only when they fit."""
    section = Section(RECALL_TITLE)
    limit = parts.policy.recall_pages
    if parts.recall is None or limit <= 0 or not parts.state.requests or room < 600:
        return section
    # Pages from the oldest call shown whole onwards are already in the working set.
    calls = working.older_calls + working.recent_calls
    start = min((c.seq for c in calls), default=parts.state.through + 1)
    try:
        pages = parts.recall.relevant(parts.state.requests[-1].text, start, limit)
    except Exception:  # a broken cache never stops context building
        return section
    for page in pages:
        section.blocks.append(Block(_page_head(page), page.text, f"recall seq {page.seq}"))
    while section.blocks:
        heads = nbytes(section.title) + 2 + sum(1 + b.head_bytes for b in section.blocks)
        per = (room - heads) // len(section.blocks) - 1
        if per >= MIN_RECALL_BODY:
            set_limit_all(section.blocks, min(per, RECALL_PAGE_BYTES))
            return section
        section.blocks.pop()
    return section


def set_limit_all(blocks: list[Block], limit: int) -> None:
    for block in blocks:
        block.limit = limit


def _page_head(page: Any) -> str:
    what = f"{page.tool} {short(page.target, 200)}".strip() if page.tool else page.kind
    note = ""
    if is_snapshot(page.tool):
        note = " (old file content as of that seq; not current)"
    return f"[recall #{page.seq}, {page.provenance}: {what}{note}]"


def _pinned_bytes(pinned: Pinned) -> int:
    return nbytes(pinned.head) + nbytes(pinned.status) + nbytes(pinned.current) + 4


def _ptr(call: Call) -> str:
    return call.full_output or call.artifact
