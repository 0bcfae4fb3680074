"""Where a run picks up from the log: the saved answer to replay, calls a kill left unsettled.

A request that got its answer (completed) or its question (needs_input) is replayed, never
run again; a call with `tool_started` and no end (or a command the user stopped before it
finished) is recorded once as `tool_uncertain` and blocks the run until the user acknowledges
it. Nothing here re-runs a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel.errors import StorageError
from kernel.run.ledger import Ledger
from kernel.store.pending import cause_of
from protocol.events import Event, FinalData, RunStartedData, UncertainCause, UserData

if TYPE_CHECKING:
    from kernel.store.session import Session

ANSWERED = ("completed", "needs_input")  # the request got its answer or its question
# How a blocked summary tells the person to go on: one phrase, so that a front end without the
# CLI's flags (ACP: the next prompt asks) can say it in its own words.
ACK_HINT = "continue with --ack-interrupted"


def needs_models(session: Session, prompt: str | None, compact: bool) -> bool:
    """False for runs that call no model: --compact, or the replay of a saved answer."""
    if compact:
        return False
    return prompt is not None or saved_answer(session.events) is None


def saved_answer(events: Sequence[Event]) -> FinalData | None:
    """The latest request's answer (completed) or question (needs_input), if it has one.

    A request that was answered stays answered until the next prompt: a later `blocked` final
    written only to record uncertainty (no run_started) does not reopen it. Without a new
    prompt such a request is replayed, never run again (issue 9, item 1).
    """
    for event in reversed(events):  # newest first: a long log is read from its end only
        data = event.data
        if isinstance(data, UserData | RunStartedData):
            return None
        if isinstance(data, FinalData) and data.status in ANSWERED:
            return data
    return None


def read_only_error(session: Session) -> StorageError:
    """Only the replay of a completed answer works on storage that refuses writes."""
    return StorageError(
        f"the session directory {session.directory} is read-only (or not writable by this "
        "user): only the replay of a completed answer works here; nothing was written"
    )


def settle_interrupted(session: Session, acknowledge: bool) -> str:
    """Record each unsettled call's uncertainty once (the ledger's `settle`, each with its
    cause: kernel/store/pending.py `cause_of`); acknowledge if asked.

    Returns '' when the run may go on, else the `blocked` summary naming the calls waiting.
    """
    waiting = Ledger(session).settle(acknowledge)
    if not waiting:
        return ""
    return (
        "Interrupted calls have an unknown outcome: "
        + ", ".join(f"{r.started.tool} {r.started.target!r} ({HOW[cause_of(r)]})" for r in waiting)
        + f". Check their effect, then {ACK_HINT} (nothing is re-run)."
    )


# How each cause stopped a call, in words (the blocked summary).
HOW: dict[UncertainCause, str] = {
    "cancelled": "cancelled by the user while it ran",
    "kernel_exit": "jmp was stopped during it",
    "worker_exit": "the tool worker died during it",
}
