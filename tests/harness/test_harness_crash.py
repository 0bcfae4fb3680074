"""Kills of the run process during an operation (kernel_exit). A kill of the harness worker
mid-operation (worker_exit) is a row of the matrix (tests/security/test_crash.py), on both
spawn paths and through every harness front end.

The operation of `items.pick` for the held item writes `<hold>.started` (holding the harness
worker's pid) and blocks reading a FIFO, so each kill lands mid-operation, after tool_started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.helpers import SCRIPTS, HarnessCli
from tests.servers.jev import JevServer
from tests.support.cli import json_lines
from tests.support.workers import pid_running, wait_until

PICK = SCRIPTS / "pick_task.py"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def start_held_run(cli: HarnessCli) -> tuple[subprocess.Popen[str], int, Path]:
    """A run whose first operation is blocked inside the harness worker; (run, worker pid)."""
    hold = cli.tmp / "hold"
    os.mkfifo(hold)
    inputs = {"items": ["a", "b"], "target": "b", "hold": str(hold), "hold_item": "a"}
    cli.jev.script([{"items.pick.item": "a"}])
    run = subprocess.Popen(
        cli.run_argv(PICK, "pick b", inputs),
        cwd=cli.cwd,
        env=cli.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = Path(f"{hold}.started")
    wait_until(lambda: started.exists() and started.read_text(), 60, "the held operation")
    return run, int(started.read_text()), hold


def test_sigkill_of_the_run_process_is_settled_by_inspect_as_kernel_exit(
    cli: HarnessCli,
) -> None:
    run, worker_pid, _hold = start_held_run(cli)
    run.kill()
    stdout, _stderr = run.communicate(timeout=60)
    session_id = json_lines(stdout)[0]["session_id"]
    # the orphaned harness worker notices its kernel is gone and exits on its own
    wait_until(lambda: not pid_running(worker_pid), 30, "the harness worker to exit")
    before = cli.events(session_id)
    assert before[-1]["kind"] == "tool_started"
    report = cli.inspect(session_id)
    assert report.code == 0, report.stderr
    data = report.lines[0]
    assert set(data) == {"session_id", "status", "summary", "artifact"}
    assert data["status"] == "blocked" and "killed" in data["summary"]
    after = cli.events(session_id)
    assert [e["kind"] for e in after[len(before) :]] == ["tool_uncertain", "final"]
    uncertain = after[len(before)]["data"]
    assert uncertain["cause"] == "kernel_exit"
    assert uncertain["call_id"] == before[-1]["data"]["call_id"]
    # a second inspect finds nothing left to settle and re-runs nothing
    again = cli.inspect(session_id)
    assert again.code == 0 and len(cli.events(session_id)) == len(after)
    assert json.loads(again.stdout)["status"] == "blocked"


@pytest.mark.parametrize(
    ("point", "uncertain"),
    [("before_tool_started", False), ("after_tool_started", True), ("after_tool_result", True)],
)
def test_a_kernel_kill_around_tool_started_is_settled_exactly(
    cli: HarnessCli, point: str, uncertain: bool
) -> None:
    cli.extra_env["JMP_CRASH_AT"] = point
    cli.jev.script([{"items.pick.item": "b"}])
    out = cli.run(PICK, "pick b", {"items": ["a", "b"], "target": "b"})
    assert out.code == -signal.SIGKILL
    session_id = out.lines[0]["session_id"]
    before = cli.events(session_id)
    assert sum(e["kind"] == "tool_started" for e in before) == int(uncertain)
    del cli.extra_env["JMP_CRASH_AT"]
    report = cli.inspect(session_id)
    assert report.code == 0 and report.lines[0]["status"] == "blocked"
    added = [e["kind"] for e in cli.events(session_id)[len(before) :]]
    assert added == (["tool_uncertain", "final"] if uncertain else ["final"])
