"""kill -9 of the kernel mid-call, on every path and front end.

The kernel_kill run (scenarios.py): the untrusted code appends a line to `effect.txt` and
blocks; the test kill -9s the process that runs the kernel (the front end's own) and nothing
else. Its workers (forked by the pool or its own children), their shells and MCP servers must
all exit on their own; the log stops at the call's `tool_started` (what is known), and
reopening the session records the call as uncertain (`kernel_exit`) and re-runs nothing.
"""

from __future__ import annotations

import pytest

from tests.security.frontends import REOPEN, TASK_SCRIPT, needs
from tests.security.scenarios import RUN_TIMEOUT_S, Run, events_of
from tests.security.test_crash import browser_survivors

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def test_every_worker_came_from_its_spawn_path(kernel_kill: Run) -> None:
    parents = kernel_kill.notes["worker_parents"]
    assert parents, "the kernel had no worker when it was killed"
    expected = kernel_kill.cell.spawn.expected_parent
    assert set(parents.values()) == {expected}, parents


def test_nothing_outlives_a_killed_kernel(kernel_kill: Run) -> None:
    assert not kernel_kill.leftovers, kernel_kill.leftovers


def test_the_log_ends_at_the_calls_tool_started(kernel_kill: Run) -> None:
    assert kernel_kill.outcome.session_id, "no session was created"
    kinds = [e["kind"] for e in kernel_kill.events]
    assert kinds[-1] == "tool_started", kinds[-5:]
    assert "tool_uncertain" not in kinds and "final" not in kinds


def test_the_call_ran_once(kernel_kill: Run) -> None:
    assert kernel_kill.world.effect.read_text().splitlines() == ["ran"]


@needs(REOPEN)
def test_reopening_records_kernel_exit_and_reruns_nothing(kernel_kill: Run) -> None:
    run = kernel_kill
    sid = run.outcome.session_id
    assert sid
    before = run.events
    again = run.cell.fe.reopen(run.world, sid)
    assert again.reported == "blocked", again.output[-2000:] + again.stderr[-2000:]
    after = events_of(run.world, sid)
    added = after[len(before) :]
    assert [e["kind"] for e in added] == ["tool_uncertain", "final"], added
    record = added[0]["data"]
    assert record["cause"] == "kernel_exit" and record["acknowledged"] is False, record
    assert record["call_id"] == before[-1]["data"]["call_id"]
    # a second reopening finds nothing left to settle
    run.cell.fe.reopen(run.world, sid)
    last = events_of(run.world, sid)[len(after) :]
    assert tuple(e["kind"] for e in last) == run.cell.fe.reopen_appends, last
    assert run.world.effect.read_text().splitlines() == ["ran"]


@needs(TASK_SCRIPT)
def test_a_browser_the_script_held_dies_with_a_killed_kernel(kernel_kill: Run) -> None:
    """issue 35: the worker exits when its kernel dies, and its browser with it."""
    assert browser_survivors(kernel_kill) == []
