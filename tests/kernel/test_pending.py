"""Which calls are interrupted, from the log alone (kernel/store/pending.py, CONTRACT.md 6).

A stopped shell command is read from the fact on `tool_finished` (`interrupted`, `reason`), not
guessed from its exit code; a log from before that field still says "left running" by -1.
"""

from __future__ import annotations

from typing import Any

import pytest

from kernel.store.pending import interrupted, unsettled
from protocol.codec import decode_event, make_event
from protocol.events import Data, Event, ToolFinishedData, ToolStartedData, ToolUncertainData

SID = "ab" * 16


def log(*datas: Data) -> list[Event]:
    return [make_event(SID, n, 0.0, d) for n, d in enumerate(datas, start=1)]


def bash(call_id: str, **finished: Any) -> list[Data]:
    started = ToolStartedData(call_id=call_id, tool="bash", target="make", request="")
    if finished.pop("unfinished", False):
        return [started]
    status = finished.pop("status", "ok")
    return [started, ToolFinishedData(call_id=call_id, tool="bash", status=status, **finished)]


def ids(events: list[Event]) -> list[str]:
    return [r.call_id for r in interrupted(events)]


@pytest.mark.parametrize(
    ("finished", "stopped"),
    [
        ({"exit_code": 0}, False),
        ({"exit_code": 130, "status": "error"}, False),  # the command itself exited 130
        ({"exit_code": -1}, True),  # an old log: left running, by the contract's -1
        ({"exit_code": -1, "interrupted": True, "reason": "cancelled"}, True),  # Ctrl+C
        ({"exit_code": 130, "interrupted": True, "reason": "cancelled"}, True),  # the fact wins
        ({"exit_code": -1, "interrupted": True, "reason": "timeout"}, False),  # tree killed
        ({"exit_code": -1, "interrupted": True, "reason": "output_cap"}, False),
        ({"unfinished": True}, True),  # tool_started and no end
    ],
)
def test_the_last_shell_command_is_interrupted_by_its_recorded_facts(
    finished: dict[str, Any], stopped: bool
) -> None:
    assert ids(log(*bash("c1", **finished))) == (["c1"] if stopped else [])


def test_only_the_last_shell_command_counts_and_an_ack_settles_it() -> None:
    cancelled = {"exit_code": -1, "interrupted": True, "reason": "cancelled", "status": "error"}
    events = log(*bash("c1", **cancelled), *bash("c2", exit_code=0))
    assert ids(events) == []  # a later command ran in the same shell: c1's stop is history
    events = log(*bash("c1", exit_code=0), *bash("c2", **cancelled))
    assert [r.call_id for r in unsettled(events)] == ["c2"]
    ack = ToolUncertainData(
        call_id="c2", tool="bash", cause="kernel_exit", acknowledged=True, note="checked"
    )
    events = log(*bash("c1", exit_code=0), *bash("c2", **cancelled), ack)
    assert ids(events) == ["c2"] and unsettled(events) == []


def test_a_log_without_the_interrupted_field_decodes_with_it_false() -> None:
    line = (
        b'{"version":1,"session_id":"' + SID.encode() + b'","seq":2,"time":0.0,'
        b'"kind":"tool_finished","data":{"call_id":"c1","tool":"bash","status":"ok",'
        b'"exit_code":-1}}'
    )
    event = decode_event(line)
    assert isinstance(event.data, ToolFinishedData)
    assert event.data.interrupted is False and event.data.reason == ""


@pytest.mark.parametrize(
    ("records", "cause"),
    [
        (bash("c1", unfinished=True), "kernel_exit"),  # no end: jmp was stopped during it
        (bash("c1", exit_code=-1), "kernel_exit"),  # left running (a log from before reasons)
        (bash("c1", exit_code=-1, interrupted=True, reason="cancelled"), "cancelled"),
        (bash("c1", exit_code=-1, interrupted=True), "cancelled"),  # stopped, no reason given
    ],
)
def test_an_uncertain_call_records_why_its_outcome_is_unknown(
    records: list[Data], cause: str
) -> None:
    """Issue 24 item 1: a command the person cancelled was recorded `kernel_exit` (jmp itself
    was stopped) by the next run; its own end says it was cancelled."""
    from kernel.store.pending import cause_of

    (record,) = unsettled(log(*records))
    assert cause_of(record) == cause
