"""The loop's window on kernel/context: each audience's projection of this session's log.

Kept across a run: the recall index (opened once, synced before each projection), the fold
cache (each projection folds only the events appended since the last) and the latest
compaction checkpoint (read once). All three are caches: losing them loses nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernel.context.policy import FoldCache

if TYPE_CHECKING:
    from kernel.context.policy import ContextPolicy, Projection
    from kernel.context.recall.index import RecallIndex
    from kernel.store.session import Session


class ContextView:
    """Projections of one session for the router and the generator."""

    def __init__(self, session: Session, policy: ContextPolicy) -> None:
        self.session = session
        self.policy = policy
        self._recall: RecallIndex | None = None
        self._loaded_checkpoint: tuple[Any] | None = None
        self._folds = FoldCache()  # each projection folds only the events appended since

    def recall_index(self) -> RecallIndex | None:
        """The session's recall cache, synced; None when it cannot be had (never fatal)."""
        from kernel.context.recall.index import RecallIndex

        try:
            if self._recall is None:
                self._recall = RecallIndex.open_or_rebuild(
                    self.session.directory / "memory.sqlite3"
                )
            self._recall.sync(self.session.events, self.session.artifacts.read_text)
        except Exception as exc:  # a broken cache never stops context construction
            print(f"jmp: recall cache unavailable: {type(exc).__name__}", file=sys.stderr)
            self._recall = None
        return self._recall

    def project(self, audience: str, reserved: int) -> Projection:
        """The audience's projection of the log (raises ContextOverflow)."""
        events = self.session.events
        # Recall offers only older non-user pages: a log without any (a new session's first
        # route) gets none from it, so the index is not opened yet (issue 11: sqlite's import,
        # open and schema were on the path to the first Jev request).
        recall = self.recall_index() if self._recall is not None or _has_pages(events) else None
        return self.policy.project(
            events,
            audience,
            reserved_bytes=reserved,
            read_artifact=self.session.artifacts.read_text,
            recall=recall,
            checkpoint=self._checkpoint(),
            cache=self._folds,
        )

    def _checkpoint(self) -> Any:
        """The latest compaction checkpoint, read once per run (building starts from it)."""
        if self._loaded_checkpoint is None:
            from kernel.context.checkpoint import load_latest_checkpoint

            self._loaded_checkpoint = (load_latest_checkpoint(self.session.directory),)
        return self._loaded_checkpoint[0]


def _has_pages(events: Sequence[Any]) -> bool:
    """Does the log hold an event recall would offer (any indexed kind but the user's)?"""
    from kernel.context.recall.pages import INDEXED
    from protocol.events import UserData

    return any(isinstance(e.data, INDEXED) and not isinstance(e.data, UserData) for e in events)
