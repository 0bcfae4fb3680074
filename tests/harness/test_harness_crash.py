"""A kernel killed at each point around `tool_started` (JMP_CRASH_AT) is settled exactly by
`jev-harness inspect`. A kill -9 of the harness worker (worker_exit) or of the run process
(kernel_exit) mid-operation are rows of the matrix (tests/security/test_crash.py,
test_kernel_kill.py), on both spawn paths and through every harness front end."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import SCRIPTS, HarnessCli

PICK = SCRIPTS / "pick_task.py"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


OPENING = ["session", "user", "task", "run_started"]  # durable before the run's first step


@pytest.mark.parametrize(
    ("point", "uncertain"),
    [
        ("after_run_started", False),
        ("before_tool_started", False),
        ("after_tool_started", True),
        ("after_tool_result", True),
    ],
)
def test_a_kernel_kill_around_tool_started_is_settled_exactly(
    cli: HarnessCli, point: str, uncertain: bool
) -> None:
    """Whenever the kill comes, the run's opening records are on the disk (run_started is
    durable before the first step: DECISIONS "Durable before visible"), so `inspect` finds a
    run that was killed, never a session without its request; what came after them may or may
    not be there (nobody was shown it), but never a `tool_started` that was not written."""
    cli.extra_env["JMP_CRASH_AT"] = point
    cli.jev.script([{"items.pick.item": "b"}])
    out = cli.run(PICK, "pick b", {"items": ["a", "b"], "target": "b"})
    assert out.code == -signal.SIGKILL
    session_id = out.lines[0]["session_id"]
    before = cli.events(session_id)
    assert [e["kind"] for e in before[: len(OPENING)]] == OPENING
    assert sum(e["kind"] == "tool_started" for e in before) == int(uncertain)
    del cli.extra_env["JMP_CRASH_AT"]
    report = cli.inspect(session_id)
    assert report.code == 0 and report.lines[0]["status"] == "blocked"
    added = [e["kind"] for e in cli.events(session_id)[len(before) :]]
    assert added == (["tool_uncertain", "final"] if uncertain else ["final"])
