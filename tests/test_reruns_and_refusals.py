"""Issue 9, items 1, 9 (argv), 12, 17 and 22, black-box through the CLI (fail on 75c1a98).

1: nothing re-runs without a new prompt (`echo RERUN >> rerun.txt` is the witness).
9: an argv prompt that is not UTF-8 is a usage error before any session exists.
12: a Jev answer outside the API's rules is a router error; no tool runs.
17: `--workspace ""`, `--workspace /` (and system dirs), `--compact --ack-interrupted` refused.
22: a request that can never fit the router's budget is refused before it is recorded, and a
    session stuck on one recorded earlier gets out with a shorter follow-up.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import ROOT, Cli, Run, short_dir, tool_call

ANSWER = "Ran the command once."
RERUN = "echo RERUN >> rerun.txt"


@dataclass
class World:
    cli: Cli
    sid: str  # a completed session whose run executed RERUN once

    @property
    def witness(self) -> Path:
        return self.cli.workspace / "rerun.txt"

    def keyless(self) -> dict[str, str]:
        return self.cli.env(TYPESAFE_API_KEY=None, FLASH_API_KEY=None)


def _complete_once(cli: Cli, prompt: str = "append RERUN to rerun.txt") -> Run:
    cli.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([tool_call(command=RERUN), {"text": ANSWER}])
    return cli.run("--no-mcp", prompt)


@pytest.fixture(scope="module")
def cli() -> Iterator[Cli]:
    """The CLI against loopback models; tests that need no model run use only this."""
    tmp = short_dir()
    with JevServer() as jev, FlashServer() as flash:
        yield Cli(tmp, jev, flash)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def world(cli: Cli) -> World:
    first = _complete_once(cli)
    assert first.code == 0, first.stderr[-3000:]
    assert first.result["status"] == "completed"
    return World(cli, first.result["session_id"])


def _reset(cli: Cli) -> None:
    """Drop unused script steps, queued replies and faults, so the next test starts clean."""
    cli.jev.state.steps.clear()
    cli.jev.state.faults.clear()
    with cli.flash.state.lock:
        cli.flash.state.items.clear()


def _stable(run: Run) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k != "time"} for line in run.lines]


def _sessions(home: Path) -> list[str]:
    return sorted(p.name for p in home.iterdir()) if home.exists() else []


# ---- item 1: nothing re-runs without a new prompt ---------------------------------------------


def test_ack_on_a_completed_session_replays_and_reruns_nothing(world: World) -> None:
    cli, sid = world.cli, world.sid
    assert world.witness.read_text() == "RERUN\n"
    log = cli.log_path(sid).read_bytes()
    seen = cli.requests_seen()
    plain = cli.run("--session", sid, env=world.keyless())
    acked = cli.run("--session", sid, "--ack-interrupted", env=world.keyless())
    assert acked.code == 0 == plain.code, acked.stderr[-2000:]
    assert acked.result["status"] == "completed" and acked.result["summary"] == ANSWER
    assert _stable(acked) == _stable(plain)  # exactly as without the flag
    assert "nothing to acknowledge" in acked.stderr
    assert "nothing to acknowledge" not in plain.stderr
    assert world.witness.read_text() == "RERUN\n"  # the command did not run again
    assert cli.requests_seen() == seen  # no model was called
    assert cli.log_path(sid).read_bytes() == log  # nothing was written


def test_readable_view_says_there_is_nothing_to_acknowledge(world: World) -> None:
    run = world.cli.run("--session", world.sid, "--ack-interrupted", json_flag=False)
    assert run.code == 0, run.stderr[-2000:]
    assert ANSWER in run.stdout and "nothing to acknowledge" in run.stderr
    assert world.witness.read_text() == "RERUN\n"


def test_needs_input_is_replayed_not_rerouted_with_or_without_ack(world: World) -> None:
    cli = world.cli
    cli.jev.script([{"route": {"bash": 0.2}}])  # confidence far below the floor
    first = cli.run("--no-mcp", "do something vague")
    assert first.code == 2 and first.result["status"] == "needs_input", first.stderr[-2000:]
    sid = first.result["session_id"]
    log = cli.log_path(sid).read_bytes()
    seen = cli.requests_seen()
    cli.jev.script([{"route": "bash"}])  # were it re-routed, this would run a command
    cli.flash.queue([tool_call(command=RERUN)])
    for extra in ((), ("--ack-interrupted",)):
        again = cli.run("--session", sid, *extra)
        assert again.code == 2, again.stderr[-2000:]
        assert again.result["status"] == "needs_input"
        assert again.result["summary"] == first.result["summary"]
    assert cli.requests_seen() == seen
    assert cli.log_path(sid).read_bytes() == log
    _reset(cli)
    assert world.witness.read_text() == "RERUN\n"


def test_ack_of_a_call_left_pending_after_the_answer_reruns_nothing(world: World) -> None:
    cli, sid = world.cli, world.sid
    home = cli.clone("pending")
    started = {"call_id": "c" * 32, "tool": "bash", "target": RERUN, "request": "artifacts/x"}
    cli.append(sid, home, "tool_started", started)
    seen = cli.requests_seen()
    blocked = cli.run("--sessions-dir", str(home), "--session", sid, env=world.keyless())
    assert blocked.code == 2 and blocked.result["status"] == "blocked", blocked.stderr[-2000:]
    acked = cli.run(
        "--sessions-dir", str(home), "--session", sid, "--ack-interrupted", env=world.keyless()
    )
    assert acked.code == 0, acked.stderr[-2000:]
    assert acked.result["status"] == "completed" and acked.result["summary"] == ANSWER
    kinds = [e["kind"] for e in cli.log(sid, home)]
    appended = len(kinds) - 1 - kinds[::-1].index("tool_started")
    assert "run_started" not in kinds[appended:]
    uncertain = [e["data"] for e in cli.log(sid, home) if e["kind"] == "tool_uncertain"]
    assert [u["acknowledged"] for u in uncertain] == [False, True]
    assert cli.requests_seen() == seen and world.witness.read_text() == "RERUN\n"


def test_an_error_session_retries_inference_and_never_repeats_a_recorded_call(cli: Cli) -> None:
    witness = cli.workspace / "again.txt"
    cli.jev.script([{"route": "bash"}])
    cli.flash.queue([tool_call(command="echo AGAIN >> again.txt")])
    cli.jev.fault("delay", count=1)  # the first route passes (a zero delay) ...
    cli.jev.fault("http500", count=20)  # ... the route after the command fails for good
    first = cli.run("--no-mcp", "append AGAIN to again.txt")
    _reset(cli)
    assert first.result["status"] == "error", first.stderr[-2000:]
    assert witness.read_text() == "AGAIN\n"
    sid = first.result["session_id"]
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([{"text": "Already done."}])
    retried = cli.run("--session", sid, "--ack-interrupted")
    assert retried.code == 0 and retried.result["summary"] == "Already done."
    assert "nothing to acknowledge" in retried.stderr
    seen = cli.requests_seen()
    replayed = cli.run("--session", sid, "--ack-interrupted")
    assert replayed.code == 0 and replayed.result["summary"] == "Already done."
    assert cli.requests_seen() == seen and witness.read_text() == "AGAIN\n"


# ---- item 17: workspace and flag combinations -------------------------------------------------


@pytest.mark.parametrize("workspace", ["", "/", "/etc", "/proc/self"])
def test_workspace_that_cannot_be_one_is_a_usage_error(cli: Cli, workspace: str) -> None:
    home = cli.tmp / "ws-refused"
    run = cli.run("--sessions-dir", str(home), "--workspace", workspace, "list files")
    assert run.code == 2 and run.result["status"] == "error"
    assert "--workspace" in run.stderr and ("empty" in run.stderr or "system" in run.stderr)
    assert _sessions(home) == []


def test_root_as_the_default_workspace_is_refused(cli: Cli) -> None:
    home = cli.tmp / "root-cwd"
    argv = [sys.executable, str(ROOT / "main.py"), "--json", "--sessions-dir", str(home), "ls"]
    run = cli.exec(argv, cwd=Path("/"))
    assert run.code == 2 and "system directory" in run.stderr
    assert _sessions(home) == []


def test_compact_with_ack_is_a_usage_error(world: World) -> None:
    log = world.cli.log_path(world.sid).read_bytes()
    run = world.cli.run("--session", world.sid, "--compact", "--ack-interrupted")
    assert run.code == 2 and "do not combine" in run.stderr
    assert world.cli.log_path(world.sid).read_bytes() == log


# ---- item 9 (argv): a prompt that is not UTF-8 --------------------------------------------------


def test_argv_prompt_that_is_not_utf8_is_refused_before_any_session(cli: Cli) -> None:
    home = cli.tmp / "bad-utf8"
    argv: list[Any] = [sys.executable, str(ROOT / "main.py"), "--json"]
    argv += ["--sessions-dir", str(home), b"fix caf\xe9 and \xff"]
    seen = cli.requests_seen()
    run = cli.exec(argv)
    assert run.code == 2 and run.result["status"] == "error"
    assert "not valid UTF-8" in run.stderr and "0xe9" in run.stderr
    assert _sessions(home) == [] and cli.requests_seen() == seen


# ---- item 22: a request that can never fit the router's budget ----------------------------------


@pytest.mark.parametrize("budget", [None, "28000"])
def test_oversized_first_request_is_refused_before_the_session(
    cli: Cli, budget: str | None
) -> None:
    home = cli.tmp / f"big-{budget}"
    prompt = "é" * 14100  # 28,200 bytes: over every allowed budget
    env = cli.env(JEV_CONTEXT_BYTES=budget)
    run = cli.run("--sessions-dir", str(home), prompt, env=env)
    assert run.code == 2 and run.result["status"] == "error"
    assert "28,200 bytes" in run.stderr and "at most" in run.stderr
    assert _sessions(home) == []


def test_oversized_follow_up_is_refused_and_nothing_is_recorded(world: World) -> None:
    log = world.cli.log_path(world.sid).read_bytes()
    seen = world.cli.requests_seen()
    run = world.cli.run("--session", world.sid, "x" * 23000)
    assert run.code == 2 and "23,000 bytes" in run.stderr and "JEV_CONTEXT_BYTES" in run.stderr
    assert world.cli.log_path(world.sid).read_bytes() == log
    assert world.cli.requests_seen() == seen


def test_session_stuck_on_an_old_oversized_request_gets_out(world: World) -> None:
    cli, sid = world.cli, world.sid
    home = cli.clone("stuck")
    cli.append(sid, home, "user", {"text": "BIG " + "y" * 30000})  # as the old code recorded it
    stuck = cli.run("--sessions-dir", str(home), "--session", sid)
    assert stuck.code == 2 and stuck.result["status"] == "blocked"
    assert "shorter follow-up" in stuck.result["summary"]
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([{"text": "Out again."}])
    before = len(cli.jev.systemone_bodies())
    out = cli.run("--sessions-dir", str(home), "--session", sid, "just say hello")
    assert out.code == 0 and out.result["summary"] == "Out again.", out.stderr[-3000:]
    state = cli.jev.systemone_bodies()[before]["state"]
    assert "cut here" in state and "just say hello" in state


# ---- item 12: Jev answers outside the API's rules ------------------------------------------------

BAD_ANSWERS = [
    ({"confidence": 5.0}, "confidence"),
    ({"add": {"read": 0.9, "edit": 0.9, "bash": 0.9}}, "sum"),
    ({"add": {"read": -0.2}}, "-0.2"),
    ({"choice": "bash"}, "most probable"),
    ({"add": {"fly": 0.0}}, "'fly'"),
]


@pytest.mark.parametrize(("patch", "named"), BAD_ANSWERS)
def test_a_jev_answer_outside_the_rules_is_a_router_error(
    cli: Cli, patch: dict[str, Any], named: str
) -> None:
    cli.jev.script([{"route": "write"}])
    cli.jev.fault("answer", answer=patch)
    cli.flash.queue([tool_call(path="written.txt", file_text="should not exist")])
    run = cli.run("--no-mcp", "write written.txt")
    _reset(cli)
    assert run.code == 2 and run.result["status"] == "error", run.stderr[-2000:]
    sid = run.result["session_id"]
    kinds = [e["kind"] for e in cli.log(sid)]
    assert "tool_started" not in kinds and kinds[-1] == "final"
    errors = [e["data"] for e in cli.log(sid) if e["kind"] == "error"]
    assert errors and errors[-1]["stage"] == "route"
    assert named in errors[-1]["message"], errors[-1]["message"]
    if named == "'fly'":
        assert "'write'" not in errors[-1]["message"]
    assert not (cli.workspace / "written.txt").exists()
    stages = {e["data"]["stage"] for e in cli.log(sid) if e["kind"] == "model_started"}
    assert stages == {"route"}  # refused before any argument was generated
