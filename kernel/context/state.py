"""The context state: a deterministic fold of the event log into requests, calls and facts.

The state is what a checkpoint stores, so it holds ints and strings only (no floats, no
times, no absolute paths): the same log always folds to the same bytes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from protocol.catalog import effect_of, is_shell, is_snapshot
from protocol.events import (
    ApprovalData,
    ErrorData,
    Event,
    FinalData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

CallStatus = Literal["pending", "ok", "error", "uncertain"]
CHUNK_ROWS = 64  # archived rows per chunk: older chunks collapse into one counted line
MAX_SNAPSHOTS = 6
MAX_ERRORS = 8  # error events kept as rows; older ones are only counted
REJECTED_TEXT = "rejected by the user before it ran: nothing was run"  # an `approval` event


class Request(msgspec.Struct, kw_only=True):
    """A user request, verbatim."""

    seq: int
    text: str


class Answer(msgspec.Struct, kw_only=True):
    """A `final` record: the assistant's answer, question or reason."""

    seq: int
    status: str
    summary: str


class Call(msgspec.Struct, kw_only=True):
    """One tool call: `tool_started` plus its `tool_finished` or `tool_uncertain`."""

    call_id: str
    tool: str
    target: str = ""
    seq: int  # seq of tool_started (or of the first record seen for this call)
    end_seq: int = 0
    status: CallStatus = "pending"
    exit_code: int | None = None
    stopped: str = ""  # the worker stopped the command: "cancelled", "timeout" or "output_cap"
    view_range: str = ""
    preview: str = ""
    full_output: str = ""
    artifact: str = ""
    request: str = ""
    error: str = ""
    cause: str = ""
    acknowledged: bool = False
    note: str = ""


class Fact(msgspec.Struct, kw_only=True):
    """An `error` event, kept as a factual row."""

    seq: int
    stage: str
    error_class: str
    message: str


class Chunk(msgspec.Struct, kw_only=True):
    """Archived factual rows (finished calls only, so a row never changes once written).

    `rows` stays encoded (the JSON list of strings the checkpoint holds, byte for byte) until
    a projection shows them (`texts`): a checkpoint of a 1M-record session holds some 300,000
    rows and a projection shows the newest few hundred (issue 25)."""

    first_seq: int
    last_seq: int
    marks: str = ""  # one letter per row: o = ok, e = error
    rows: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"[]"))

    def texts(self) -> list[str]:
        """The rows, oldest first."""
        return _rows_decoder.decode(self.rows)

    def add(self, texts: list[str], marks: str) -> None:
        """Append rows (and their one-letter marks) to this chunk."""
        self.rows = msgspec.Raw(msgspec.json.encode(self.texts() + texts))
        self.marks += marks


_rows_decoder = msgspec.json.Decoder(list[str])


class State(msgspec.Struct, kw_only=True):
    """Everything a projection needs; a checkpoint is this, frozen at `through`."""

    session_id: str = ""
    through: int = 0
    requests: list[Request] = msgspec.field(default_factory=list)
    last_final: Answer | None = None
    previous_answer: Answer | None = None
    calls: list[Call] = msgspec.field(default_factory=list)  # working set, in seq order
    chunks: list[Chunk] = msgspec.field(default_factory=list)  # the archive, oldest first
    archived: int = 0
    snapshots: list[Call] = msgspec.field(default_factory=list)  # oldest first
    latest: Call | None = None
    verification: Call | None = None
    errors: list[Fact] = msgspec.field(default_factory=list)
    errors_dropped: int = 0

    def copy(self) -> State:
        """A copy that can fold more events without touching this one (the archive is shared)."""
        clone = msgspec.structs.replace(self)
        clone.requests = list(self.requests)
        clone.calls = [msgspec.structs.replace(c) for c in self.calls]
        clone.chunks = list(self.chunks)
        clone.snapshots = list(self.snapshots)
        clone.errors = list(self.errors)
        return clone


# --- read snapshots: each rule is one small function -------------------------------


def snapshot_key(call: Call) -> tuple[str, str]:
    """Snapshots are distinct per (file, range)."""
    return (call.target, call.view_range)


def remember_read(snapshots: list[Call], call: Call, limit: int = MAX_SNAPSHOTS) -> list[Call]:
    """A successful read replaces the same (file, range) and keeps only the latest `limit`."""
    if not is_snapshot(call.tool) or call.status != "ok":
        return snapshots
    kept = [s for s in snapshots if snapshot_key(s) != snapshot_key(call)]
    kept.append(call)
    return kept[-limit:]


def invalidate_for_action(snapshots: list[Call], tool: str, target: str) -> list[Call]:
    """By the tool's effect class (protocol/catalog): `any` drops every snapshot (shell, MCP),
    `writes_target` drops its own target's, `observes` none."""
    effect = effect_of(tool)
    if effect == "any":
        return []
    if effect == "writes_target":
        return [s for s in snapshots if s.target != target]
    return snapshots


def invalidate_for_uncertain(snapshots: list[Call]) -> list[Call]:
    """An uncertain call may have done anything, so no observation can be trusted."""
    return []


def invalidate_for_request(snapshots: list[Call]) -> list[Call]:
    """A new user request starts a new cache."""
    return []


# --- the fold ----------------------------------------------------------------------


def view_range_of(arguments: str) -> str:
    """The `view_range` inside an arguments preview (JSON), or "" when absent or unparsable."""
    if "view_range" not in arguments:
        return ""
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return ""
    found = value.get("view_range") if isinstance(value, dict) else None
    return msgspec.json.encode(found).decode() if found else ""


def _start(state: State, index: dict[str, Call], seq: int, data: ToolStartedData) -> None:
    call = Call(
        call_id=data.call_id,
        tool=data.tool,
        target=data.target,
        seq=seq,
        request=data.request,
        view_range=view_range_of(data.arguments) if is_snapshot(data.tool) else "",
    )
    index[data.call_id] = call
    state.calls.append(call)
    state.latest = call
    # Invalidate at start: the effect may happen any time after the call began.
    state.snapshots = invalidate_for_action(state.snapshots, data.tool, data.target)


def _call_for(state: State, index: dict[str, Call], seq: int, call_id: str, tool: str) -> Call:
    call = index.get(call_id)
    if call is None:  # an end without a start (odd log): still a fact worth keeping
        call = Call(call_id=call_id, tool=tool, seq=seq)
        index[call_id] = call
        state.calls.append(call)
    return call


def _finish(
    state: State, index: dict[str, Call], seq: int, data: ToolFinishedData, limit: int
) -> None:
    call = _call_for(state, index, seq, data.call_id, data.tool)
    call.end_seq = seq
    call.status = data.status
    call.exit_code = data.exit_code
    call.stopped = (data.reason or "stopped") if data.interrupted else ""
    call.preview = data.text
    call.full_output = data.full_output
    call.artifact = data.artifact
    call.error = data.error
    call.target = call.target or data.target
    if is_snapshot(call.tool) and not call.view_range:
        call.view_range = view_range_of(data.arguments)
    state.latest = call
    if is_shell(call.tool):
        state.verification = call
    state.snapshots = invalidate_for_action(state.snapshots, call.tool, call.target)
    state.snapshots = remember_read(state.snapshots, call, limit)


def _uncertain(state: State, index: dict[str, Call], seq: int, data: ToolUncertainData) -> None:
    call = _call_for(state, index, seq, data.call_id, data.tool)
    call.end_seq = seq
    call.status = "uncertain"
    call.cause = data.cause
    call.acknowledged = call.acknowledged or data.acknowledged
    call.note = data.note
    call.exit_code = data.exit_code
    call.target = call.target or data.target
    state.latest = call
    state.snapshots = invalidate_for_uncertain(state.snapshots)


def _rejected(state: State, index: dict[str, Call], seq: int, data: ApprovalData) -> None:
    """A rejected call: a finished error that ran nothing (so no snapshot is invalidated)."""
    call = _call_for(state, index, seq, data.call_id, data.tool)
    call.end_seq, call.status, call.error = seq, "error", REJECTED_TEXT
    call.target = call.target or data.target
    state.latest = call


def _user(state: State, seq: int, data: UserData) -> None:
    state.requests.append(Request(seq=seq, text=data.text))
    state.previous_answer = state.last_final
    state.snapshots = invalidate_for_request(state.snapshots)


def _error(state: State, seq: int, data: ErrorData) -> None:
    state.errors.append(
        Fact(seq=seq, stage=data.stage, error_class=data.error_class, message=data.message)
    )
    if len(state.errors) > MAX_ERRORS:
        state.errors_dropped += len(state.errors) - MAX_ERRORS
        del state.errors[: len(state.errors) - MAX_ERRORS]


def fold(
    state: State,
    events: Sequence[Event],
    max_snapshots: int = MAX_SNAPSHOTS,
    index: dict[str, Call] | None = None,
) -> State:
    """Apply the events after `state.through` in place; `index` is call_index(state), kept."""
    if index is None:
        index = call_index(state)
    for event in events_after(events, state.through):
        seq = event.seq or 0
        data: Any = event.data
        if not state.session_id:
            state.session_id = event.session_id
        if isinstance(data, ToolStartedData):
            _start(state, index, seq, data)
        elif isinstance(data, ToolFinishedData):
            _finish(state, index, seq, data, max_snapshots)
        elif isinstance(data, ToolUncertainData):
            _uncertain(state, index, seq, data)
        elif isinstance(data, UserData):
            _user(state, seq, data)
        elif isinstance(data, FinalData):
            state.last_final = Answer(seq=seq, status=data.status, summary=data.summary)
        elif isinstance(data, ErrorData):
            _error(state, seq, data)
        elif isinstance(data, ApprovalData) and data.decision == "rejected":
            _rejected(state, index, seq, data)
        state.through = max(state.through, seq)
    return state


def call_index(state: State) -> dict[str, Call]:
    """Call id to call, the later one winning (as the fold finds them)."""
    return {c.call_id: c for c in state.calls}


def events_after(events: Sequence[Event], through: int) -> Sequence[Event]:
    """The events with seq > through. A log's seqs go up by one a line, so the place is
    computed and checked (two records read: a session's log reads them from disk on demand);
    anything else is bisected, because the log is in seq order."""
    if through <= 0 or not events:
        return events
    guess = through - (events[0].seq or 0) + 1
    if 0 < guess <= len(events) and events[guess - 1].seq == through:
        return events[guess:]
    start = bisect.bisect_right(events, through, key=lambda e: e.seq if e.seq is not None else -1)
    return events[start:]


def archivable(call: Call) -> bool:
    """Only finished calls are archived: pending and uncertain ones stay as facts."""
    return call.status in ("ok", "error")
