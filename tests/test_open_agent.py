"""The one door to an agent (kernel/loop/opening.py `open_agent`), through the Python boundary:
what it checks, in which order, and that a refusal leaves nothing created or held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import main
from kernel.errors import ConfigError, SessionLocked, UsageError, WorkspaceMismatch
from tests.support.embed import FLASH_KEY


@pytest.fixture
def env(embed_env: Path) -> Path:
    return embed_env


def no_servers() -> Any:
    return main.load_servers(enabled=False)


def door(home: Path, **kw: Any) -> Any:
    return main.open_agent(home, main.Settings.environment(), no_servers, **kw)


def test_a_new_session_runs_then_reopens_with_the_workspace_checked(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    jev, flash = servers
    jev.script([{"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"text": f"done, and the key is {FLASH_KEY}"}])
    home = short_tmp / "home"
    agent = door(home, workspace=env, planned=main.Planned("say done"))
    try:
        result = agent.run(prompt="say done")
    finally:
        agent.close()
    assert result["status"] == "completed" and FLASH_KEY not in result["summary"]
    sid = result["session_id"]
    other = short_tmp / "other"
    other.mkdir()
    with pytest.raises(WorkspaceMismatch, match=f"--workspace {other} differs"):
        door(home, session_id=sid, workspace=other, named=f"--workspace {other}")
    main.Session.open(home, sid).close()  # the refusal released the lock
    replay = door(home, session_id=sid, planned=main.Planned())
    try:
        assert replay.tools.servers is None  # a replay needs no model: no server was loaded
        assert replay.run()["summary"] == result["summary"]
        with pytest.raises(SessionLocked):
            door(home, session_id=sid)
    finally:
        replay.close()


def test_refusals_before_a_session_exists(
    env: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = short_tmp / "home"
    with pytest.raises(UsageError, match="the request is"):
        door(home, workspace=env, planned=main.Planned("x" * 200_000))
    monkeypatch.delenv("FLASH_API_KEY")
    with pytest.raises(ConfigError, match="FLASH_API_KEY"):
        door(home, workspace=env, planned=main.Planned("hello"))
    assert not home.exists() or list(home.iterdir()) == []


def test_a_failure_after_the_session_exists_closes_it(env: Path, short_tmp: Path) -> None:
    home = short_tmp / "home"
    with pytest.raises(TypeError):
        door(home, workspace=env, no_such_agent_option=1)
    (sid,) = [p.name for p in home.iterdir() if not p.name.startswith(".")]
    main.Session.open(home, sid).close()  # not held
