"""Ctrl+C during a shell command, through the real CLI, then a follow-up run (CONTRACT.md 6).

A terminal's Ctrl+C sends SIGINT to the foreground process group: here the CLI leads a group of
its own (workers live in groups of their own, as they do under a terminal). The run ends
`cancelled` (exit 2); the command's `tool_finished` says what is known, as facts: stopped
before it finished (`interrupted: true`, `reason: "cancelled"`), `exit_code -1` (unfinished,
never success) whatever the shell said after C-c. Its partial effect is unknown, so the next
run on the session is `blocked` until `--ack-interrupted`, and nothing re-runs.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.support.cli import Cli, wait_for_line
from tests.support.workers import live_with, wait_until

# Real CLI runs with cold workers (openhands imports) on a shared machine: wider than the default.
pytestmark = pytest.mark.timeout(300)

MARK = "sleep 31.2468"
COMMAND = f"echo ran >> effect.txt; {MARK}; echo after >> effect.txt"


def effect(cli: Cli) -> list[str]:
    path = cli.workspace / "effect.txt"
    return path.read_text().splitlines() if path.exists() else []


def of(log: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in log if e["kind"] == kind]


def test_ctrl_c_during_a_shell_command_then_a_follow_up_run(jmp: Cli) -> None:
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": COMMAND}}}])
    proc = jmp.start("--workspace", str(jmp.workspace), "run the slow job")
    lines = wait_for_line(proc, lambda line: line["kind"] == "tool_started")
    sid = lines[0]["session_id"]
    wait_until(lambda: live_with(MARK), 60, "the shell command to start")  # did not hang
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl+C does

    stdout, stderr = proc.communicate(timeout=60)
    printed = [*lines, *map(json.loads, stdout.splitlines())]
    assert proc.returncode == 2, stderr[-3000:]
    assert printed[-1]["kind"] == "result" and printed[-1]["data"]["status"] == "cancelled"
    wait_until(lambda: not live_with(MARK), 30, "the stopped command's processes to go")
    assert effect(jmp) == ["ran"]  # stopped mid-command: the line after the sleep never ran

    log = jmp.log(sid)
    (finished,) = of(log, "tool_finished")
    assert finished["tool"] == "bash" and finished["status"] == "error"
    assert finished["exit_code"] == -1, finished  # unfinished, whatever the shell said (130)
    assert finished["interrupted"] is True and finished["reason"] == "cancelled"
    assert log[-1]["kind"] == "final" and log[-1]["data"]["status"] == "cancelled"
    assert not of(log, "tool_uncertain")  # the worker lived: its result is recorded, not lost

    # The follow-up is kept and blocked: the stopped command's partial effect is unknown.
    follow = jmp.run("--session", sid, "follow-up")
    assert follow.code == 2 and follow.result["status"] == "blocked", follow.stderr[-3000:]
    (record,) = of(jmp.log(sid), "tool_uncertain")
    assert record["call_id"] == finished["call_id"] and record["cause"] == "cancelled"
    assert record["acknowledged"] is False

    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "followed up"}])
    acked = jmp.run("--session", sid, "--ack-interrupted")
    assert acked.code == 0 and acked.result["status"] == "completed", acked.stderr[-3000:]

    log = jmp.log(sid)
    assert [u["text"] for u in of(log, "user")] == ["run the slow job", "follow-up"]
    assert [u["acknowledged"] for u in of(log, "tool_uncertain")] == [False, True]
    assert len(of(log, "tool_started")) == 1 and effect(jmp) == ["ran"]  # nothing re-ran
    assert of(log, "tool_finished") == [finished]  # the first command's record stands as written
    assert [f["status"] for f in of(log, "final")] == ["cancelled", "blocked", "completed"]


def test_ctrl_c_in_the_readable_view_prints_the_command_that_will_work(jmp: Cli) -> None:
    """Issue 37: after Ctrl+C during a command, the view's last line is the next command that
    works: `--ack-interrupted` (a bare `--session ID` would only say `blocked`), and it does."""
    import shlex
    import subprocess
    import sys

    from tests.support.cli import ROOT

    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": COMMAND}}}])
    proc = subprocess.Popen(
        jmp.argv("--workspace", str(jmp.workspace), "run the slow job", json_flag=False),
        cwd=jmp.workspace, env=jmp.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    wait_until(lambda: live_with(MARK), 120, "the shell command to start")
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr[-3000:]
    status, step = stdout.splitlines()[-2:]
    assert status.startswith("[cancelled] session "), stdout[-2000:]
    assert step.startswith("  check what the interrupted call did, then: jmp "), step
    words = shlex.split(step.split("then: ", 1)[1])
    assert words[-1] == "--ack-interrupted", words
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "acknowledged"}])
    typed = jmp.exec([sys.executable, str(ROOT / "main.py"), *words[1:]], json_flag=False)
    assert typed.code == 0 and "[completed] session" in typed.stdout, typed.stdout[-3000:]
