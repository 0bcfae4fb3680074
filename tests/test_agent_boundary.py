"""The Python boundary of CONTRACT section 4, embedded in this process (models at the wire)."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

import main
from kernel.errors import SessionLocked
from protocol.events import Event
from tests.support.embed import build_agent
from tests.support.warm import workers_of
from tests.support.workers import KillAt, stage_started, wait_until, worker_of


@pytest.fixture
def env(embed_env: Path) -> Path:
    return embed_env


def command(proc: psutil.Process) -> str:
    """A process's command line, or "" for one that is exiting (a zombie) meanwhile."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


class ClosesBadly(main.Tools):  # type: ignore[name-defined,misc]
    """A Tools whose close fails after stopping its worker (a worker that resists cleanup)."""

    def close(self) -> None:
        super().close()
        raise OSError("could not remove the runtime directory")


def build(home: Path, workspace: Path, on_event: Any, tools_cls: Any = None) -> Any:
    return build_agent(home, workspace, on_event=on_event, tools_cls=tools_cls)


def test_embedded_run_persists_even_when_the_subscriber_raises(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    jev, flash = servers
    jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"command": "echo hi > out.txt"}}}, {"text": "ok"}])
    seen: list[Event] = []

    def subscriber(event: Event) -> None:
        seen.append(event)
        raise RuntimeError("a broken subscriber")

    agent = build(short_tmp / "home", env, subscriber)
    try:
        result = agent.run(prompt="write out.txt")
    finally:
        agent.close()
    assert set(result) == {"session_id", "status", "summary", "session_dir"}
    assert result["status"] == "completed" and result["summary"] == "ok"
    assert (env / "out.txt").read_text() == "hi\n"
    log = Path(result["session_dir"]) / "events.jsonl"
    persisted = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["seq"] for e in persisted] == [e.seq for e in seen if e.seq is not None]
    assert persisted[-1]["kind"] == "final"


def test_close_releases_the_lock_and_warns_when_cleanup_fails(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"text": "hello"}])
    seen: list[Event] = []
    home = short_tmp / "home"
    agent = build(home, env, seen.append, ClosesBadly)
    result = agent.run(prompt="say hello")
    with pytest.raises(SessionLocked):
        main.Session.open(home, result["session_id"])  # held for the run
    agent.close()
    warnings = [e for e in seen if e.kind == "cleanup_warning"]
    assert len(warnings) == 1 and warnings[0].seq is None
    assert warnings[0].data.error_class == "OSError"
    main.Session.open(home, result["session_id"]).close()  # the lock is free again
    log = (Path(result["session_dir"]) / "events.jsonl").read_text()
    assert "cleanup_warning" not in log


def test_a_long_run_ends_with_a_checkpoint(
    env: Path, servers: tuple[Any, Any], short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernel.loop.agent

    monkeypatch.setattr(kernel.loop.agent, "AUTO_COMPACT_EVENTS", 12)
    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}] * 2)
    flash.queue([{"text": "one"}, {"text": "two"}])
    home = short_tmp / "home"
    agent = build(home, env, None)
    try:
        first = agent.run(prompt="first")
        kinds = [e.kind for e in agent.session.events]
        assert kinds[-2:] == ["compaction", "compaction"]  # 12 records: checkpointed
        through = agent.session.events[-1].data.through
        assert (Path(first["session_dir"]) / f"context-{through}.json").is_file()
        agent.run(prompt="second")  # 11 records since: no new checkpoint
        assert agent.session.events[-1].kind == "final"
    finally:
        agent.close()


@pytest.mark.parametrize("kind", ["router", "generator"])
def test_a_model_worker_killed_between_runs_is_replaced_with_no_wait(
    env: Path, servers: tuple[Any, Any], short_tmp: Path, kind: str
) -> None:
    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}] * 2)
    flash.queue([{"text": "one"}, {"text": "two"}])
    agent = build(short_tmp / "home", env, None)
    try:
        assert agent.run(prompt="first")["status"] == "completed"
        worker_of(kind).send_signal(signal.SIGKILL)  # and no wait: the next run starts at once
        result = agent.run(prompt="second")
        assert result["status"] == "completed" and result["summary"] == "two", result
    finally:
        agent.close()


@pytest.mark.parametrize(("kind", "stage"), [("router", "route"), ("generator", "respond")])
def test_a_model_request_lost_to_a_dead_worker_is_retried_once_on_a_fresh_one(
    env: Path, servers: tuple[Any, Any], short_tmp: Path, kind: str, stage: str
) -> None:
    """The worker dies after the kernel last looked at it and before its request is answered:
    the request is lost, and sent again once, to a fresh worker."""
    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}] * 2)
    flash.queue([{"text": "one"}, {"text": "two"}])
    killer = KillAt(kind, stage_started(stage))
    agent = build(short_tmp / "home", env, None)
    try:
        assert agent.run(prompt="first")["status"] == "completed"
        first = worker_of(kind).pid
        killer.hook(agent.session)
        result = agent.run(prompt="second")
        assert killer.killed == [first]
        assert result["status"] == "completed" and result["summary"] == "two", result
        assert worker_of(kind).pid != first
        kinds = [e.kind for e in agent.session.events]
        run = agent.session.events[len(kinds) - kinds[::-1].index("user") :]  # the second run
        assert [e.kind for e in run if e.kind == "error"] == []
        started = [e for e in run if e.kind == "model_started" and e.data.stage == stage]
        assert len(started) == 2  # one per request that left: the lost one and the retry
    finally:
        agent.close()


def test_a_second_death_of_a_model_worker_ends_the_run_error(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"text": "one"}])
    killer = KillAt("router", stage_started("route"), times=2)
    agent = build(short_tmp / "home", env, None)
    killer.hook(agent.session)
    try:
        result = agent.run(prompt="first")
        assert len(set(killer.killed)) == 2  # the first worker and its replacement
        assert result["status"] == "error", result
        (error,) = [e.data for e in agent.session.events if e.kind == "error"]
        assert error.stage == "route" and error.error_class == "WorkerDied"
        assert "SIGKILL" in error.message
    finally:
        agent.close()


@pytest.mark.timeout(300)  # three cold OpenHands imports (the first worker and two replacements)
def test_an_idle_tool_worker_that_died_is_replaced_before_the_next_call(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    """Dead with nothing in flight (between two calls of a run, and between two runs): no call
    was lost, so a fresh worker takes the next one and the run goes on."""
    jev, flash = servers
    jev.script([{"route": "bash"}] * 2 + [{"route": "done"}, {"completion_review": "complete"}])
    flash.queue(
        [
            {"tool_call": {"arguments": {"command": "echo one"}}},
            {"tool_call": {"arguments": {"command": "echo two"}}},
            {"text": "ran two"},
        ]
    )
    killer = KillAt("tool", lambda e: e.kind == "tool_finished")
    agent = build(short_tmp / "home", env, None)
    killer.hook(agent.session)
    try:
        result = agent.run(prompt="run two commands")
        assert len(killer.killed) == 1
        assert result["status"] == "completed", result
        finished = [e.data for e in agent.session.events if e.kind == "tool_finished"]
        assert [f.status for f in finished] == ["ok", "ok"]
        assert "one" in finished[0].text.splitlines() and "two" in finished[1].text.splitlines()
        second = worker_of("tool").pid
        assert second != killer.killed[0]

        jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
        flash.queue([{"tool_call": {"arguments": {"command": "echo three"}}}, {"text": "ok"}])
        worker_of("tool").send_signal(signal.SIGKILL)  # idle, and no wait
        result = agent.run(prompt="one more")
        assert result["status"] == "completed", result
        assert worker_of("tool").pid not in (second, killer.killed[0])
        kinds = [e.kind for e in agent.session.events]
        assert "tool_uncertain" not in kinds and "error" not in kinds
        assert agent.session.events[-1].kind == "final"
        finished = [e.data for e in agent.session.events if e.kind == "tool_finished"]
        assert finished[-1].status == "ok" and "three" in finished[-1].text.splitlines()
    finally:
        agent.close()


@pytest.mark.timeout(300)  # two cold OpenHands imports on a shared machine
def test_a_tool_worker_that_died_in_a_call_is_replaced_for_the_next_run(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    jev, flash = servers
    jev.script([{"route": "bash"}])
    flash.queue([{"tool_call": {"arguments": {"command": "sleep 31.75"}}}])
    agent = build(short_tmp / "home", env, None)
    try:

        def kill_worker_mid_call() -> None:
            wait_until(
                lambda: any(
                    "sleep 31.75" in command(p)
                    for tool in workers_of(os.getpid(), "tool")
                    for p in tool.children(recursive=True)
                ),
                240,
                "the command to start",
            )
            worker_of("tool").send_signal(signal.SIGKILL)

        killer = threading.Thread(target=kill_worker_mid_call)
        killer.start()
        assert agent.run(prompt="slow")["status"] == "blocked"
        killer.join()
        jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
        flash.queue([{"tool_call": {"arguments": {"command": "echo again"}}}, {"text": "ok"}])
        result = agent.run(acknowledge_pending=True)
        assert result["status"] == "completed", result
        finished = [e.data for e in agent.session.events if e.kind == "tool_finished"]
        assert finished[-1].status == "ok" and "again" in finished[-1].text
    finally:
        agent.close()
