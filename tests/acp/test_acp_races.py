"""`jmp --acp`'s races (issue 20 item 10), made deterministic: the agent runs in this process on
a socket pair, behind the real transport and the SDK's client, and the test holds a thread at
the await point the race needs (a monkeypatch that waits on an Event), never a sleep."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from acp import text_block
from acp.client.connection import ClientSideConnection

from acp_server import sessions
from acp_server.main import run_connection
from acp_server.server import JmpAcpAgent
from acp_server.wire import MAX_LINE_BYTES
from tests.acp.helpers import Recorder, run
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)
HOLD_S = 120  # how long a held thread waits at most (a bound on a hang, not a timing)


@contextlib.asynccontextmanager
async def in_process(
    jmp: Cli, monkeypatch: pytest.MonkeyPatch, warm: int = 4
) -> AsyncIterator[tuple[JmpAcpAgent, ClientSideConnection, Recorder]]:
    """`jmp --acp`'s serving loop (acp_server.main.run_connection) in this process."""
    env = jmp.env()
    for name in ("TYPESAFE_API_KEY", "TYPESAFE_BASE_URL", "FLASH_API_KEY", "FLASH_BASE_URL"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("JMP_MCP_CONFIG", env["JMP_MCP_CONFIG"])
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    agent = JmpAcpAgent(sessions.Config(jmp.home), warm=warm)
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours, limit=MAX_LINE_BYTES)
    serving = asyncio.create_task(run_connection(agent, reader, writer))
    client_reader, client_writer = await asyncio.open_connection(sock=theirs)
    client = Recorder()
    conn = ClientSideConnection(client, client_writer, client_reader)
    try:
        await conn.initialize(protocol_version=1)
        yield agent, conn, client
    finally:
        await conn.close()
        client_writer.close()  # the agent's input ends: it shuts down as on stdin EOF
        await asyncio.wait_for(serving, HOLD_S)


def hold(entered: threading.Event, release: threading.Event) -> None:
    entered.set()
    assert release.wait(HOLD_S), "never released"


async def until(condition: Any) -> None:
    """Poll a condition the test cannot be told of (a notification has no reply)."""
    for _ in range(HOLD_S * 20):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


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
