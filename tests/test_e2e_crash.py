"""Hard kills through the real CLI: the log always says exactly what is known, nothing re-runs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.support.cli import Cli, finish, kill_group, wait_for_line
from tests.support.warm import processes_of, workers_of

APPEND = "echo ran >> effect.txt"


def processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def of_this_test(jmp: Cli) -> list[psutil.Process]:
    """Every process of this test's kernels, warm or cold: CLI, workers, shells."""
    return processes_of(jmp.home, jmp.tmp)


def wait_gone(marker: str | Cli, timeout: float = 8.0) -> list[psutil.Process]:
    """Wait until no process matches (a cmdline marker, or a test's environment)."""

    def left() -> list[psutil.Process]:
        return processes_with(marker) if isinstance(marker, str) else of_this_test(marker)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not left():
            return []
        time.sleep(0.1)
    return left()


def effect_lines(jmp: Cli) -> int:
    path = jmp.workspace / "effect.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def script_one_bash(jmp: Cli, command: str) -> None:
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": command}}}])


def script_finish(jmp: Cli) -> None:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "finished"}])


def uncertain(log: list[dict]) -> list[dict]:
    return [e["data"] for e in log if e["kind"] == "tool_uncertain"]


@pytest.mark.slow  # asserts a wall-clock bound
def test_tool_worker_killed_mid_command_is_uncertain_within_two_seconds(jmp: Cli) -> None:
    script_one_bash(jmp, f"{APPEND}; sleep 30.4321")
    proc = jmp.start("--workspace", str(jmp.workspace), "run the slow job")
    lines = wait_for_line(proc, lambda line: line["kind"] == "tool_started")
    session = lines[0]["session_id"]
    deadline = time.monotonic() + 20
    while not processes_with("sleep 30.4321") and time.monotonic() < deadline:
        time.sleep(0.05)
    (worker,) = workers_of(proc.pid, "tool")
    killed = time.monotonic()
    worker.send_signal(signal.SIGKILL)
    rest = wait_for_line(proc, lambda line: line["kind"] == "tool_uncertain", timeout=10)
    assert time.monotonic() - killed < 2.0
    record = rest[-1]["data"]
    assert record["cause"] == "worker_exit" and record["acknowledged"] is False
    assert finish(proc) == 2
    assert not wait_gone("sleep 30.4321")
    log = jmp.log(session)
    assert log[-1]["kind"] == "final" and log[-1]["data"]["status"] == "blocked"
    # reopening does not add a second record for the same call, and stays blocked
    again = jmp.run("--session", session)
    assert again.code == 2 and again.result["status"] == "blocked"
    assert len(uncertain(jmp.log(session))) == 1


@pytest.mark.parametrize(
    ("crash_at", "ran"),
    [
        ("after_run_started", 0),
        ("before_tool_started", 0),
        ("after_tool_started", 0),
        ("after_tool_result", 1),
    ],
)
def test_kernel_killed_at_each_point_reports_exactly_the_pending_call(
    jmp: Cli, crash_at: str, ran: int
) -> None:
    script_one_bash(jmp, APPEND)
    env = jmp.env() | {"JMP_CRASH_AT": crash_at}
    first = jmp.task("append a line", env=env)
    assert first.code == -signal.SIGKILL
    session = first.lines[0]["session_id"]
    opening = [e["kind"] for e in jmp.log(session)[:3]]
    assert opening == ["session", "user", "run_started"]  # durable before the first step
    assert effect_lines(jmp) == ran
    assert not wait_gone(jmp)  # the orphaned workers exit on their own, with their children
    if crash_at in ("after_run_started", "before_tool_started"):
        script_finish(jmp)
        reopened = jmp.run("--session", session)
        assert reopened.code == 0, reopened.stderr
        assert not uncertain(jmp.log(session))
        return
    reopened = jmp.run("--session", session)
    assert reopened.code == 2 and reopened.result["status"] == "blocked"
    (record,) = uncertain(jmp.log(session))
    assert record["cause"] == "kernel_exit" and record["acknowledged"] is False
    script_finish(jmp)
    acked = jmp.run("--session", session, "--ack-interrupted")
    assert acked.code == 0, acked.stderr
    assert [r["acknowledged"] for r in uncertain(jmp.log(session))] == [False, True]
    assert effect_lines(jmp) == ran  # nothing ran twice, nothing re-ran by itself


def test_kernel_group_killed_during_the_command(jmp: Cli) -> None:
    script_one_bash(jmp, f"{APPEND}; sleep 40.321")
    proc = jmp.start("--workspace", str(jmp.workspace), "slow job")
    lines = wait_for_line(proc, lambda line: line["kind"] == "tool_started")
    session = lines[0]["session_id"]
    deadline = time.monotonic() + 20
    while effect_lines(jmp) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_group(proc)
    assert not wait_gone("sleep 40.321"), "the shell outlived its kernel"
    assert not wait_gone(jmp), "a worker outlived its kernel"
    reopened = jmp.run("--session", session)
    assert reopened.code == 2 and reopened.result["status"] == "blocked"
    assert uncertain(jmp.log(session))[0]["cause"] == "kernel_exit"
    script_finish(jmp)
    acked = jmp.run("--session", session, "--ack-interrupted")
    assert acked.code == 0, acked.stderr
    assert effect_lines(jmp) == 1


def test_a_follow_up_on_an_uncertain_session_is_kept_and_blocked(jmp: Cli) -> None:
    script_one_bash(jmp, APPEND)
    first = jmp.task("append", env=jmp.env() | {"JMP_CRASH_AT": "after_tool_started"})
    session = first.lines[0]["session_id"]
    follow = jmp.run("--session", session, "and then tidy up")
    assert follow.code == 2 and follow.result["status"] == "blocked"
    texts = [e["data"]["text"] for e in jmp.log(session) if e["kind"] == "user"]
    assert texts == ["append", "and then tidy up"]


def test_workspace_path_escape_is_refused(jmp: Cli, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    jmp.jev.script([{"route": "write"}] * 3)
    bad = {"tool_call": {"arguments": {"path": str(outside), "file_text": "x"}}}
    jmp.flash.queue([bad, bad, bad])
    out = jmp.task("write outside")
    assert out.code == 2
    assert not outside.exists()
    assert "tool_started" not in out.kinds()
    assert os.path.exists(jmp.home / out.result["session_id"] / "events.jsonl")
