"""Incremental folding: one session's state, advanced only by the events appended since.

A step projects twice and the log only grows between projections, so re-folding it all
(from the checkpoint, or from the first event) each time is wasted work. The cached state
is always equal to a fresh fold of the same events from the same checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel.context.checkpoint import Checkpoint, usable
from kernel.context.state import Call, State, call_index, fold
from protocol.events import Event


class FoldCache:
    """The folded state of one growing event list; hand it to `ContextPolicy.project`."""

    def __init__(self) -> None:
        self._state = State()
        self._index: dict[str, Call] = {}
        self._checkpoint: Checkpoint | None = None
        self._from_checkpoint = False
        self._max_snapshots = -1
        self._first: Event | None = None
        self._last: Event | None = None
        self._count = 0
        self.refolds = 0  # fresh folds (the first one, or after the log was replaced)

    def state(
        self, events: Sequence[Event], checkpoint: Checkpoint | None, max_snapshots: int
    ) -> State:
        """The fold of `events` from `checkpoint` when usable; shared, so never mutate it."""
        from_checkpoint = checkpoint is not None and usable(checkpoint, events)
        if not self._continues(events, checkpoint, from_checkpoint, max_snapshots):
            self._reset(checkpoint if from_checkpoint else None, max_snapshots)
            self._checkpoint, self._from_checkpoint = checkpoint, from_checkpoint
        count = len(events)  # first: the fold goes by seq, so a record appended meanwhile is fine
        fold(self._state, events, max_snapshots, self._index)
        self._count = count
        self._first = events[0] if count else None
        self._last = events[count - 1] if count else None
        return self._state

    def _continues(
        self,
        events: Sequence[Event],
        checkpoint: Checkpoint | None,
        from_checkpoint: bool,
        max_snapshots: int,
    ) -> bool:
        """The same base and the same log, grown at most: everything folded is still a prefix."""
        same_base = checkpoint is self._checkpoint and from_checkpoint == self._from_checkpoint
        if not same_base or max_snapshots != self._max_snapshots or len(events) < self._count:
            return False
        # Events are immutable and the log is append-only: the same first and last objects
        # at the same places mean the same prefix (a reopened log has new objects: refold).
        return self._count == 0 or (
            events[0] is self._first and events[self._count - 1] is self._last
        )

    def _reset(self, checkpoint: Checkpoint | None, max_snapshots: int) -> None:
        self._state = checkpoint.state.copy() if checkpoint is not None else State()
        self._index = call_index(self._state)
        self._max_snapshots = max_snapshots
        self._count = 0
        self.refolds += 1
