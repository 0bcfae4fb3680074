"""Which tool calls have an unknown outcome, read from the log alone (CONTRACT.md section 6).

A call is *interrupted* when it has `tool_started` and no `tool_finished`, or when it is the
last shell command and its `tool_finished` says it did not finish: `interrupted: true` (stopped
by Ctrl+C/cancel: its partial effect is unknown), or exit_code -1 (still running when its
worker went away; a log from before the `interrupted` field says only this). A command stopped
at a limit (`reason` "timeout" or "output_cap") is not: its process tree is known dead.
An interrupted call is *recorded* once a `tool_uncertain` names it, and *settled* once a
`tool_uncertain` with `acknowledged: true` does. Nothing here ever re-runs anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.catalog import is_shell
from protocol.events import (
    Event,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UncertainCause,
)

# What `tool_uncertain` says for each cause (a worker_exit or cancelled note opens with `why`),
# and once acknowledged (kernel/run/ledger.py writes them).
NOTES: dict[str, str] = {
    "worker_exit": "{why}. The call's effect is unknown; nothing re-ran it.",
    "kernel_exit": (
        "The call started and has no recorded end: its effect is unknown. Nothing re-ran it."
    ),
    "cancelled": "{why} before it finished: what it did until then is unknown. Nothing re-ran it.",
    "acknowledged": (
        "Acknowledged by the user: outcome still unknown; not re-run, not assumed done."
    ),
}
CANCELLED_WHY = "The user cancelled the call"


@dataclass
class CallRecord:
    """Everything the log says about one call_id."""

    started: ToolStartedData
    finished: ToolFinishedData | None = None
    uncertain: ToolUncertainData | None = None  # the latest uncertainty record
    acknowledged: bool = False

    @property
    def call_id(self) -> str:
        return self.started.call_id


def calls(events: Sequence[Event]) -> dict[str, CallRecord]:
    """Every call in log order, keyed by call_id."""
    records: dict[str, CallRecord] = {}
    for event in events:
        data = event.data
        if isinstance(data, ToolStartedData):
            records[data.call_id] = CallRecord(started=data)
        elif isinstance(data, ToolFinishedData) and data.call_id in records:
            records[data.call_id].finished = data
        elif isinstance(data, ToolUncertainData) and data.call_id in records:
            record = records[data.call_id]
            record.uncertain = data
            record.acknowledged = record.acknowledged or data.acknowledged
    return records


def interrupted(events: Sequence[Event]) -> list[CallRecord]:
    """Calls whose outcome is unknown: no end, or the last shell command left running."""
    records = list(calls(events).values())
    last_shell = next((r for r in reversed(records) if is_shell(r.started.tool)), None)
    return [r for r in records if r.finished is None or (r is last_shell and _running(r.finished))]


def _running(finished: ToolFinishedData) -> bool:
    """Unfinished by the record's own facts, unless it was stopped at a limit (tree killed)."""
    unfinished = finished.interrupted or finished.exit_code == -1
    return unfinished and finished.reason not in ("timeout", "output_cap")


def unsettled(events: Sequence[Event]) -> list[CallRecord]:
    """Interrupted calls not yet acknowledged: these block a run until --ack-interrupted."""
    return [r for r in interrupted(events) if not r.acknowledged]


def cause_of(record: CallRecord) -> UncertainCause:
    """Why a call's outcome is unknown, from its own records: the cause already recorded; a
    command whose end says the person stopped it (`interrupted`, reason "cancelled" or, in a
    log from before reasons, none) `cancelled`; anything else (no end, or a command left
    running with exit_code -1) `kernel_exit`, as CONTRACT section 6 says."""
    if record.uncertain is not None:
        return record.uncertain.cause
    finished = record.finished
    if finished is not None and finished.interrupted and finished.reason in ("", "cancelled"):
        return "cancelled"
    return "kernel_exit"
