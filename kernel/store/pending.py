"""Which tool calls have an unknown outcome, read from the log alone (docs/CONTRACT.md section 6).

A call is *interrupted* when it has `tool_started` and no `tool_finished`, or when it is the
last shell command and its `tool_finished` says it did not finish: `interrupted: true` (stopped
by Ctrl+C/cancel: its partial effect is unknown), or exit_code -1 (still running when its
worker went away; a log from before the `interrupted` field says only this). A command stopped
at a limit (`reason` "timeout" or "output_cap") is not: its process tree is known dead.
An interrupted call is *recorded* once a `tool_uncertain` names it, and *settled* once a
`tool_uncertain` with `acknowledged: true` does. Nothing here ever re-runs anything.

A session's log (a LogEvents) knows its settled watermark and the few records before it that
rebuild the calls still open there (kernel/store/log_index.py; kept record by record by
`Settling`). `unsettled` then reads only those and the records after it, so asking costs about
an open, not a walk of the history; a plain list is read whole.
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
    """Interrupted calls not yet acknowledged: these block a run until --ack-interrupted.

    Of a session's log, only the records after its watermark are read, and before it those of
    the calls still open there (`LogEvents.pending`): every other call started before it has
    its outcome, and records after it about those calls cannot make one unsettled again (a
    call is acknowledged once for good; its end is written once)."""
    from kernel.store.log_events import LogEvents  # the store's own sequence, on its side

    if isinstance(events, LogEvents):
        events = list(events.pending())
    return [r for r in interrupted(events) if not r.acknowledged]


class _Call:
    """A call Settling follows, and the seqs of the records that say what it knows of it."""

    __slots__ = ("finished", "record", "started", "uncertain")

    def __init__(self, record: CallRecord, started: int) -> None:
        self.record, self.started, self.finished, self.uncertain = record, started, 0, 0


class Settling:
    """Whether `unsettled` of the records fed so far would be empty, kept record by record
    (the settled mark of each events.index entry). Holds only the calls still open and the
    last shell command, so its memory does not grow with history. Fed from a settled point
    (an entry marked settled, or record 1), or from the records `resume` names (in seq order),
    it answers for everything since record 1."""

    def __init__(self) -> None:
        self._open: dict[str, _Call] = {}  # started, no end, not acknowledged
        self._last_shell: _Call | None = None

    def add(self, event: Event) -> None:
        data, seq = event.data, event.seq or 0
        if isinstance(data, ToolStartedData):
            started = _Call(CallRecord(started=data), seq)
            self._open[data.call_id] = started
            if is_shell(data.tool):
                self._last_shell = started
            return
        if not isinstance(data, ToolFinishedData | ToolUncertainData):
            return
        call: _Call | None = self._open.get(data.call_id)
        shell = self._last_shell
        if call is None and shell is not None and shell.record.call_id == data.call_id:
            call = shell
        if call is None:
            return  # a call settled before (or never started): nothing changes
        record = call.record
        if isinstance(data, ToolFinishedData):
            record.finished, call.finished = data, seq
        else:
            record.uncertain, call.uncertain = data, seq
            record.acknowledged = record.acknowledged or data.acknowledged
        if record.acknowledged or record.finished is not None:
            self._open.pop(data.call_id, None)

    @property
    def settled(self) -> bool:
        """No call fed so far is unsettled."""
        shell = self._last_shell.record if self._last_shell is not None else None
        left_running = (
            shell is not None
            and shell.finished is not None
            and _running(shell.finished)
            and not shell.acknowledged
        )
        return not self._open and not left_running

    def resume(self) -> tuple[int, ...]:
        """The seqs of the records that, fed in order to a new Settling, give it this one's
        state (empty when settled): each open call's start and latest uncertainty record, and
        the last shell command's records (it decides whether an end makes a call "left
        running"). An events.index entry keeps them, so open resumes at any entry; a call open
        for the whole session costs its own records, not the history since it started."""
        if self.settled:
            return ()
        calls = [*self._open.values(), *([self._last_shell] if self._last_shell else [])]
        seqs = {s for c in calls for s in (c.started, c.finished, c.uncertain)}
        return tuple(sorted(seqs - {0}))


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
