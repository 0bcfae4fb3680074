"""The context policy (CONTRACT section 9): byte-budgeted projections, never a model summary.

Pinned verbatim: every user request and the previous assistant answer. Execution records are
facts: recent ones whole, older ones archived into rows at 85% of the budget, oversized
results cut with explicit omission markers. Pinned intent that cannot fit raises
ContextOverflow; everything else degrades so the text always fits its budget in UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kernel.context.cache import FoldCache
from kernel.context.checkpoint import (
    Checkpoint,
    build_checkpoint,
    load_latest_checkpoint,
    usable,
    write_checkpoint,
)
from kernel.context.fit import Parts, fit
from kernel.context.render import cut_head, nbytes, row, short
from kernel.context.state import State, fold
from kernel.errors import ConfigError, ContextOverflow
from protocol.events import CompactionData, Event

if TYPE_CHECKING:
    from kernel.context.recall.index import RecallIndex

__all__ = [
    "Checkpoint",
    "ContextPolicy",
    "FoldCache",
    "Projection",
    "load_latest_checkpoint",
    "write_checkpoint",
]

Audience = Literal["router", "generator"]
AUDIENCES: tuple[Audience, ...] = ("router", "generator")
JEV_MAX_BYTES = 28000
LABELS = {
    "router": "ROUTER PROJECTION (smaller than the generator's): session facts for choosing "
    "the next tool.",
    "generator": "GENERATOR PROJECTION: session facts for writing tool arguments or the answer.",
}
RUN_END_BYTES = 600
EARLIER_CUT_BYTES = 2000  # what an earlier request that can never fit keeps (see pinned_text)


@dataclass
class Projection:
    """One audience's context block; `bytes` is its UTF-8 length, always within the budget."""

    text: str
    bytes: int
    through: int
    archived: int
    audience: str = ""
    budget: int = 0


@dataclass
class ContextPolicy:
    """Budgets and knobs of the context policy (defaults are the contract's)."""

    jev_bytes: int = 24000
    flash_bytes: int = 96000
    pressure: float = 0.85
    keep_whole: int = 4
    max_snapshots: int = 6
    recall_pages: int = 2

    def __post_init__(self) -> None:
        if self.jev_bytes > JEV_MAX_BYTES:
            raise ConfigError(
                f"JEV_CONTEXT_BYTES={self.jev_bytes} is above the limit of {JEV_MAX_BYTES} bytes"
            )
        if self.jev_bytes <= 0:
            raise ConfigError(f"JEV_CONTEXT_BYTES={self.jev_bytes} must be a positive number")
        if self.flash_bytes <= 0:
            raise ConfigError(f"FLASH_CONTEXT_BYTES={self.flash_bytes} must be a positive number")

    @classmethod
    def from_settings(cls, jev_bytes: int, flash_bytes: int) -> ContextPolicy:
        """The policy for configured budgets; refuses a Jev budget above 28000 bytes."""
        return cls(jev_bytes=jev_bytes, flash_bytes=flash_bytes)

    def budget(self, audience: str) -> int:
        """The audience's whole budget in bytes (before the caller's reserved part)."""
        if audience not in LABELS:
            raise ValueError(f"unknown audience {audience!r}: use 'router' or 'generator'")
        return self.jev_bytes if audience == "router" else self.flash_bytes

    def state(self, events: Sequence[Event], checkpoint: Checkpoint | None = None) -> State:
        """The folded state: from the checkpoint when usable, processing only later events."""
        base = checkpoint.state.copy() if checkpoint and usable(checkpoint, events) else State()
        return fold(base, events, self.max_snapshots)

    def project(
        self,
        events: Sequence[Event],
        audience: str,
        *,
        reserved_bytes: int,
        read_artifact: Callable[[str], str] | None = None,
        recall: RecallIndex | None = None,
        checkpoint: Checkpoint | None = None,
        cache: FoldCache | None = None,  # one per event list: fold only what was appended since
    ) -> Projection:
        """The context block within budget minus reserved; ContextOverflow if intent cannot fit."""
        whole = self.budget(audience)
        budget = whole - reserved_bytes
        if cache is None:
            state = self.state(events, checkpoint)
        else:  # the fitter only reads the state, so the cached one is used as it is
            state = cache.state(events, checkpoint, self.max_snapshots)
        pinned = pinned_text(state, audience, cut_over=budget)
        need = nbytes(pinned.head) + nbytes(pinned.status) + nbytes(pinned.current) + 4
        if need > budget:
            raise ContextOverflow(overflow_message(audience, need, whole, reserved_bytes))
        parts = Parts(
            state=state,
            pinned=pinned,
            budget=budget,
            read_artifact=read_artifact,
            recall=recall,
            policy=self,
        )
        text, archived = fit(parts)
        return Projection(
            text=text,
            bytes=nbytes(text),
            through=state.through,
            archived=archived,
            audience=audience,
            budget=budget,
        )

    def checkpoint(
        self, events: Sequence[Event], audience: str, base: Checkpoint | None = None
    ) -> tuple[bytes, CompactionData]:
        """Deterministic checkpoint bytes for the log, and the `compaction` event data.

        From `base` (the previous checkpoint) when it is usable, folding only the events after
        it, as a projection does (issue 25: a compact of a 1M-record log folds the records
        since the last compaction, not the history): the same log and the same base always
        give the same bytes."""
        self.budget(audience)
        start = base.state if base is not None and usable(base, events) else None
        data, through = build_checkpoint(events, self.keep_whole, self.max_snapshots, start)
        info = CompactionData(
            audience=audience,
            through=through,
            checkpoint=f"context-{through}.json",
            method="deterministic",
        )
        return data, info


@dataclass
class Pinned:
    """The parts that are never trimmed: header and earlier intent, status, current request."""

    head: str
    status: str
    current: str


def pinned_text(state: State, audience: str, cut_over: int | None = None) -> Pinned:
    """Render the pinned intent and the minimal factual status.

    An earlier request longer than `cut_over` bytes (the whole room of this audience's
    budget: it could never fit, so it would block the session for good) is shown cut, with a
    marker that says so; every other request is verbatim. Since new requests that cannot fit
    are refused before they are recorded (kernel/loop/admit.py), only requests recorded
    before that check, or under a larger budget, are ever cut (issue 9, item 22).
    """
    parts = [LABELS[audience]]
    earlier = state.requests[:-1]
    if earlier:
        lines = ["== EARLIER REQUESTS (user, verbatim, oldest first) =="]
        lines += [f"[request #{r.seq}]\n{_earlier(r.seq, r.text, cut_over)}" for r in earlier]
        parts.append("\n".join(lines))
    answer = state.previous_answer
    if answer is not None:
        parts.append(
            f"== PREVIOUS ASSISTANT ANSWER #{answer.seq}, status {answer.status} "
            f"(conversation, not evidence) ==\n{answer.summary}"
        )
    if state.requests:
        last = state.requests[-1]
        current = f"== CURRENT REQUEST #{last.seq} (user, verbatim) ==\n{last.text}"
    else:
        current = "== CURRENT REQUEST ==\n(none: the session has no user request yet)"
    return Pinned(head="\n\n".join(parts), status=status_text(state), current=current)


def _earlier(seq: int, text: str, cut_over: int | None) -> str:
    size = nbytes(text)
    if cut_over is None or size <= cut_over:
        return text
    kept = cut_head(text, EARLIER_CUT_BYTES)
    return (
        f"{kept}\n[request #{seq} cut here: {nbytes(kept):,} of {size:,} bytes shown, because "
        f"the whole request can never fit this budget; `recall` with seq {seq} pages it]"
    )


def status_text(state: State) -> str:
    """Latest execution, latest verification, unacknowledged uncertainty, the last run end."""
    lines = ["== STATUS (facts as recorded) =="]
    latest = row(state.latest) if state.latest else "none yet"
    lines.append(f"latest execution: {latest}")
    check = row(state.verification) if state.verification else "no shell command yet"
    lines.append(f"latest verification (last shell command): {check}")
    for call in state.calls:
        if call.status == "uncertain" and not call.acknowledged:
            lines.append(f"UNCERTAIN, not acknowledged: {row(call)}")
    final = state.last_final
    current_seq = state.requests[-1].seq if state.requests else 0
    if final is not None and final.seq > current_seq:
        summary = short(final.summary, RUN_END_BYTES)
        lines.append(f"last run ended #{final.seq} with status {final.status}: {summary}")
    return "\n".join(lines)


def overflow_message(audience: str, need: int, whole: int, reserved: int) -> str:
    """A clear ContextOverflow message: what did not fit, and in which budget."""
    setting = "JEV_CONTEXT_BYTES" if audience == "router" else "FLASH_CONTEXT_BYTES"
    if reserved >= whole:
        return (
            f"context overflow for the {audience}: {setting}={whole:,} bytes cannot even hold "
            f"the instructions, question and schemas ({reserved:,} bytes), let alone the pinned "
            f"intent ({need:,} bytes). Nothing was trimmed; raise {setting}."
        )
    can_raise = audience == "generator" or need + reserved <= JEV_MAX_BYTES
    raise_it = (
        f"raise {setting}"
        if can_raise
        else f"{setting} cannot help (its limit is {JEV_MAX_BYTES:,} bytes)"
    )
    return (
        f"context overflow for the {audience}: the pinned intent (user requests, previous "
        f"answer, latest status) needs {need:,} bytes but only {whole - reserved:,} are "
        f"available ({setting}={whole:,} minus {reserved:,} reserved). Nothing was trimmed; "
        f'{raise_it}, or give a shorter follow-up request (--session ID "..."): an earlier '
        "request that can never fit is then shown cut, with a marker."
    )
