"""`jmp --acp`'s races (issue 20 item 10), made deterministic: the agent runs in this process on
a socket pair, behind the real transport and the SDK's client, and the test holds a thread at
the await point the race needs (a monkeypatch that waits on an Event), never a sleep."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from acp import text_block

from acp_server import sessions
from tests.acp.helpers import HOLD_S, hold, in_process, run, until
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)


def test_a_cancel_right_after_a_prompt_is_kept(jmp: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cancel arrives while the prompt awaits its key check: before, the `cancel.clear()`
    after that await erased it and the turn ran to `end_turn`."""
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "This turn should not have run."}])

    async def scenario() -> str:
        async with in_process(jmp, monkeypatch) as (agent, conn, client):
            session = (await conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])).session_id
            entered, release = threading.Event(), threading.Event()
            settings = agent.config.settings

            def held_settings() -> Any:  # the prompt's key check, on its worker thread
                hold(entered, release)
                return settings()

            monkeypatch.setattr(agent.config, "settings", held_settings)
            turn = asyncio.create_task(conn.prompt(session_id=session, prompt=[text_block("hi")]))
            assert await asyncio.to_thread(entered.wait, HOLD_S)
            await conn.cancel(session_id=session)
            await until(agent.handles[session].agent.cancel.is_set)
            release.set()
            assert (await asyncio.wait_for(turn, HOLD_S)).stop_reason == "cancelled"
            assert not client.of("agent_message_chunk")
        return session

    session = run(scenario())
    assert [e["data"]["status"] for e in jmp.log(session) if e["kind"] == "final"] == ["cancelled"]
    assert not jmp.flash.completions()  # nothing was generated


def test_cooling_idle_sessions_never_stops_a_prompt_that_just_started(
    jmp: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sessions, one kept warm: cooling stops the second least recent while a prompt
    starts on the least recent. Before, the cooler went on with the list it had made, and
    stopped the workers of the running prompt (its bash call became uncertain)."""
    go = jmp.tmp / "go"
    wait = f"while [ ! -e {go} ]; do sleep 0.05; done; echo released"
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": wait}}}, {"text": "Done."}])

    async def scenario() -> str:
        async with in_process(jmp, monkeypatch, warm=1) as (agent, conn, client):
            ids = [
                (await conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])).session_id
                for _ in range(3)
            ]
            oldest, middle, newest = (agent.handles[i] for i in ids)
            for rank, handle in enumerate((oldest, middle, newest), start=1):
                handle.last_prompt = float(rank)  # prompted in this order, idle now
            entered, release = threading.Event(), threading.Event()
            cool = sessions.Handle.cool

            def held_cool(handle: sessions.Handle) -> None:
                if handle is middle:
                    hold(entered, release)
                cool(handle)

            monkeypatch.setattr(sessions.Handle, "cool", held_cool)
            cooling = asyncio.create_task(agent._cool_others())  # as after a prompt's response
            assert await asyncio.to_thread(entered.wait, HOLD_S)  # the middle one first
            turn = asyncio.create_task(conn.prompt(session_id=oldest.id, prompt=[text_block("x")]))
            await client.wait_for(lambda u: u.session_update == "tool_call")  # its bash runs
            release.set()
            await asyncio.wait_for(cooling, HOLD_S)
            go.touch()
            assert (await asyncio.wait_for(turn, HOLD_S)).stop_reason == "end_turn"
            assert client.text() == "Done."
            assert middle.last_prompt == 0.0  # it was cooled, the running one was not
        return oldest.id

    session = run(scenario())
    log = jmp.log(session)
    assert [e["kind"] for e in log if e["kind"].startswith("tool_")] == [
        "tool_started",
        "tool_finished",
    ]
    assert [e["data"]["status"] for e in log if e["kind"] == "final"] == ["completed"]
