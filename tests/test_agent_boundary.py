"""The Python boundary of CONTRACT section 4, embedded in this process (models at the wire)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

import main
from kernel.errors import SessionLocked
from protocol.events import Event
from tests.support.warm import gone, workers_of


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, servers: tuple[Any, Any], short_tmp: Path) -> Path:
    jev, flash = servers
    monkeypatch.setenv("TYPESAFE_API_KEY", "boundary-jev-key-123456")
    monkeypatch.setenv("TYPESAFE_BASE_URL", jev.url)
    monkeypatch.setenv("FLASH_API_KEY", "boundary-flash-key-123456")
    monkeypatch.setenv("FLASH_BASE_URL", flash.url)
    workspace = short_tmp / "ws"
    workspace.mkdir()
    return workspace


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
    session = main.Session.create(home, workspace, on_event=on_event)
    models = main.Models(session, main.Settings.environment())
    tools = (tools_cls or main.Tools)(workspace, session.directory / "terminal", None)
    return main.Agent(
        session,
        models,
        tools,
        policy=main.ContextPolicy(),
        instructions=main.instructions(),
        cancel=threading.Event(),
    )


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


def test_a_model_worker_that_died_between_runs_is_replaced(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    import os
    import signal

    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}] * 2)
    flash.queue([{"text": "one"}, {"text": "two"}])
    agent = build(short_tmp / "home", env, None)
    try:
        assert agent.run(prompt="first")["status"] == "completed"

        (router,) = workers_of(os.getpid(), "router")
        router.send_signal(signal.SIGKILL)
        assert gone([router.pid])  # dead (a warm one stays a zombie of the pool until released)
        # Known dead at once, not at the I/O thread's next look (the race a sleep used to hide).
        assert agent.models._router.exited
        result = agent.run(prompt="second")
        assert result["status"] == "completed" and result["summary"] == "two"
    finally:
        agent.close()


def test_a_tool_worker_that_died_in_a_call_is_replaced_for_the_next_run(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    import os
    import signal
    import time

    jev, flash = servers
    jev.script([{"route": "bash"}])
    flash.queue([{"tool_call": {"arguments": {"command": "sleep 31.75"}}}])
    agent = build(short_tmp / "home", env, None)
    try:

        def kill_worker_mid_call() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for tool in workers_of(os.getpid(), "tool"):
                    if any("sleep 31.75" in command(p) for p in tool.children(recursive=True)):
                        tool.send_signal(signal.SIGKILL)
                        return
                time.sleep(0.05)

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
