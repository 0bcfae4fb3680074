"""A pulled plug right after the client was told of a finished call, on every path and front end.

The powercut run (scenarios.py): the sessions dir is on the power-cut simulator (strict POSIX,
everything unsynced lost); the power is cut as soon as the client has heard of a finished call
(the CLI's and the Python APIs' JSON lines, an ACP `tool_call_update`, jev-harness's lines, the
MCP server's `run_task` result). In the agent family that is the first of two calls: the
kernel is then projecting and routing the next one, with that call's records and artifacts
being synced. What the client was told must be on the disk afterwards (durable before
visible, whatever the front end), no effect may be without its durable `tool_started`, and
the session must open with every file its records name complete.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jmp_lab.chaos.powercut.control import available
from kernel.store.session import Session
from tests.security.scenarios import RUN_TIMEOUT_S, Run, told_of_a_result

REASON = available()
pytestmark = [
    pytest.mark.timeout(RUN_TIMEOUT_S + 120),
    pytest.mark.skipif(REASON is not None, reason=f"power cuts need FUSE: {REASON}"),
]


def _by_seq(run: Run) -> dict[int, dict[str, Any]]:
    return {e["seq"]: e for e in run.events}


def _lost(run: Run) -> list[str]:
    """What the client was told that the disk does not hold (described)."""
    kept, heard, lost = _by_seq(run), run.notes["heard"], []
    ends = {
        e["data"]["call_id"] for e in run.events if e["kind"] in ("tool_finished", "tool_uncertain")
    }
    started = {e["data"]["call_id"] for e in run.events if e["kind"] == "tool_started"}
    finals = [e["data"]["status"] for e in run.events if e["kind"] == "final"]
    for item in heard:
        if isinstance(item, dict) and isinstance(item.get("seq"), int):  # a record, as a line
            if kept.get(item["seq"]) != item:
                lost.append(f"seq {item['seq']} {item.get('kind')}: {kept.get(item['seq'])}")
        elif isinstance(item, dict) and item.get("method") == "session/update":  # ACP
            update = item["params"]["update"]
            call = update.get("toolCallId")
            asked = update.get("status") == "pending"  # a permission ask: before it starts
            if update.get("sessionUpdate") == "tool_call" and not asked and call not in started:
                lost.append(f"tool_call {call}: no tool_started")
            if update.get("status") in ("completed", "failed") and call not in ends:
                lost.append(f"tool_call_update {call} {update['status']}: no end record")
        elif getattr(item, "structuredContent", None) is not None:  # an MCP result
            status = item.structuredContent.get("status")
            if finals[-1:] != [status]:
                lost.append(f"run_task said {status}; the log's finals: {finals}")
    return lost


def test_the_client_was_told_of_a_finished_call_before_the_cut(powercut: Run) -> None:
    assert any(told_of_a_result(item) for item in powercut.notes["heard"])
    assert powercut.outcome.session_id, "no session on the disk after the cut"


def test_what_the_client_was_told_is_on_the_disk_after_the_cut(powercut: Run) -> None:
    assert not _lost(powercut), _lost(powercut)


def test_no_effect_without_its_durable_tool_started(powercut: Run) -> None:
    effects = powercut.world.effect.read_text().splitlines()
    assert effects, "nothing ran before the cut"
    started = [e["data"] for e in powercut.events if e["kind"] == "tool_started"]
    if powercut.cell.fe.family == "agent":  # each effect is `echo LINE` of its own call
        for line in effects:
            assert any(f"echo {line} " in s["target"] for s in started), (line, started)
    else:
        assert len(effects) <= len(started), (effects, started)


def test_the_session_opens_and_what_its_records_name_is_complete(powercut: Run) -> None:
    sid = powercut.outcome.session_id
    assert sid
    harness = powercut.cell.fe.family == "harness"  # jev-harness's own inspect opens those
    with Session.open(powercut.world.home, sid, harness=harness) as again:
        for event in again.events:
            for field in ("request", "artifact", "full_output"):
                rel = getattr(event.data, field, "")
                if not rel:
                    continue
                path = again.directory / rel
                assert path.is_file(), f"{rel}, named by seq {event.seq}, is missing"
                if rel.endswith(".json"):
                    json.loads(path.read_text())  # complete: a short copy does not parse
