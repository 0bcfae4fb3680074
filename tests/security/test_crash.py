"""kill -9 of the worker running a call, mid-call, on every path and front end.

The crash run (scenarios.py): the untrusted code appends a line to `effect.txt` and blocks;
the test kills the worker that runs it (the tool worker, or the harness worker) with SIGKILL.
The log must say the call's outcome is unknown (`tool_uncertain`, cause `worker_exit`), the
client must be told so, the run must end blocked, nothing may re-run the call, and no process
of the run may outlive it.
"""

from __future__ import annotations

import json
import signal

import psutil
import pytest

from tests.security.frontends import REOPEN, TASK_SCRIPT, needs
from tests.security.scenarios import RUN_TIMEOUT_S, Run, events_of
from tests.support.browser import missing_browser, skip_without_browser

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def _uncertain(run: Run) -> list[dict]:
    return [e["data"] for e in run.events if e["kind"] == "tool_uncertain"]


def test_the_killed_worker_came_from_its_spawn_path(crash: Run) -> None:
    assert crash.notes["worker_parent"] == crash.cell.spawn.expected_parent, crash.notes


def test_the_log_says_the_call_is_uncertain_and_the_run_blocked(crash: Run) -> None:
    (record,) = _uncertain(crash)
    assert record["cause"] == "worker_exit" and record["acknowledged"] is False, record
    assert record["signal"] == signal.SIGKILL, record
    started = [e["data"]["call_id"] for e in crash.events if e["kind"] == "tool_started"]
    assert started == [record["call_id"]]
    final = crash.events[-1]
    assert final["kind"] == "final" and final["data"]["status"] == "blocked", final


def test_the_client_is_told_the_outcome_is_unknown(crash: Run) -> None:
    assert crash.outcome.told_uncertain, crash.outcome.output[-3000:]


def test_the_front_end_ends_the_run_blocked(crash: Run) -> None:
    fe = crash.cell.fe
    assert crash.outcome.reported == fe.blocked_reported, crash.outcome.output[-2000:]
    if fe.blocked_exit is not None:
        assert crash.outcome.code == fe.blocked_exit, crash.outcome.stderr[-2000:]


def test_the_call_ran_once(crash: Run) -> None:
    assert crash.world.effect.read_text().splitlines() == ["ran"]


def test_no_process_outlives_the_run(crash: Run) -> None:
    assert not crash.leftovers, crash.leftovers


@needs(REOPEN)
def test_reopening_adds_no_second_record_and_stays_blocked(crash: Run) -> None:
    assert crash.outcome.session_id
    before = len(crash.events)
    again = crash.cell.fe.reopen(crash.world, crash.outcome.session_id)
    assert again.reported == "blocked", again.output[-2000:] + again.stderr[-2000:]
    after = events_of(crash.world, crash.outcome.session_id)
    added = tuple(e["kind"] for e in after[before:])
    assert added == crash.cell.fe.reopen_appends, after[before:]
    assert crash.world.effect.read_text().splitlines() == ["ran"]


def browser_survivors(run: Run) -> list[str]:
    """The processes of the browser the task script held open that are still running (a pid
    counts only with its recorded start time); skips where no browser is installed (fails under
    JMP_REQUIRE_BROWSER=1)."""
    record = run.world.tmp / "browser.json"
    if not record.exists():
        skip_without_browser(missing_browser() or "the task script never started one")
    procs = json.loads(record.read_text())
    assert any("chromium" in argv for _pid, _t, argv in procs), procs
    alive, named = [], {pid: argv for pid, _t, argv in procs}
    for pid, started, _argv in procs:
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            continue
    return [f"{p.pid} {named[p.pid]}" for p in psutil.wait_procs(alive, timeout=30)[1]]


@needs(TASK_SCRIPT)
def test_a_browser_the_script_held_dies_with_the_worker(crash: Run) -> None:
    """issue 35: Playwright's driver, Chromium and its zygotes, renderers and helpers."""
    assert browser_survivors(crash) == []
