"""ACP session modes, resume and close (issue 24 items 3-4), in this process behind the real
transport and the SDK's client (tests/acp/helpers.py `in_process`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from acp import RequestError, text_block

from tests.acp.helpers import HOLD_S, in_process, run
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)


def kinds(log: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in log]


def test_ask_mode_asks_before_each_effect_and_records_the_answer_first(
    jmp: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reject once (the router sees it and goes on), then allow always: the second command
    runs unasked. The CLI behaviour (auto) is the default and asks nothing."""
    jmp.jev.script(
        [
            {"route": "bash"},
            {"route": "bash"},
            {"route": "bash"},
            {"route": "done"},
            {"completion_review": "complete"},
        ]
    )
    jmp.flash.queue(
        [
            {"tool_call": {"arguments": {"command": "echo no > rejected.txt"}}},
            {"tool_call": {"arguments": {"command": "echo yes >> ran.txt"}}},
            {"tool_call": {"arguments": {"command": "echo again >> ran.txt"}}},
            {"text": "Ran it twice."},
        ]
    )

    async def scenario() -> str:
        async with in_process(jmp, monkeypatch) as (_agent, conn, client):
            opened = await conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])
            assert opened.modes is not None and opened.modes.current_mode_id == "auto"
            assert [m.id for m in opened.modes.available_modes] == ["auto", "ask"]
            session = opened.session_id
            with pytest.raises(RequestError, match="no mode 'careful'"):
                await conn.set_session_mode(mode_id="careful", session_id=session)
            await conn.set_session_mode(mode_id="ask", session_id=session)
            answers = iter(["reject", "always"])
            asked: list[Any] = []
            client.choose = lambda tool_call, options: (
                asked.append((tool_call, options)) or next(answers)
            )
            done = await conn.prompt(session_id=session, prompt=[text_block("run things")])
            assert done.stop_reason == "end_turn" and client.text() == "Ran it twice."
            assert len(asked) == 2  # the third command: allowed always, not asked again
            first, options = asked[0]
            assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once"}
            assert first.status == "pending" and first.title == "Run echo no > rejected.txt"
            pending = [u for u in client.of("tool_call") if u.status == "pending"]
            assert [u.tool_call_id for u in pending] == [
                first.tool_call_id,
                asked[1][0].tool_call_id,
            ]
            ends = {u.tool_call_id: u for u in client.of("tool_call_update") if u.status}
            assert ends[first.tool_call_id].status == "failed"  # rejected: never ran
        return session

    session = run(scenario())
    log = jmp.log(session)
    assert not (jmp.workspace / "rejected.txt").exists()
    assert (jmp.workspace / "ran.txt").read_text() == "yes\nagain\n"
    approvals = [e for e in log if e["kind"] == "approval"]
    assert [(a["data"]["decision"], a["data"]["scope"], a["data"]["asked"]) for a in approvals] == [
        ("rejected", "once", True),
        ("allowed", "session", True),
        ("allowed", "session", False),
    ]
    seqs = {e["data"]["call_id"]: e["seq"] for e in log if e["kind"] == "tool_started"}
    assert approvals[0]["data"]["call_id"] not in seqs
    for approval in approvals[1:]:  # each answer recorded right before its tool_started
        assert seqs[approval["data"]["call_id"]] == approval["seq"] + 1
    assert [e["data"]["mode"] for e in log if e["kind"] == "mode"] == ["ask"]
    state = jmp.jev.systemone_bodies()[1]["state"]  # the route after the rejection
    assert "rejected by the user before it ran" in state


def test_resume_opens_without_replay_and_close_releases_the_session(
    jmp: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}] * 2)
    jmp.flash.queue([{"text": "First."}, {"text": "Second."}])

    async def scenario() -> str:
        async with in_process(jmp, monkeypatch) as (agent, conn, client):
            session = (await conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])).session_id
            await conn.prompt(session_id=session, prompt=[text_block("one")])
            await conn.set_session_mode(mode_id="ask", session_id=session)
            await conn.close_session(session_id=session)
            assert session not in agent.handles
            lock = jmp.home / session / "lock"
            assert lock.read_text() == ""  # released: the holder's pid is cleared
            with pytest.raises(RequestError, match="not open here"):
                await conn.prompt(session_id=session, prompt=[text_block("closed")])
            client.clear()
            resumed = await conn.resume_session(
                cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
            )
            assert client.shown() == []  # no replay (only the session's state beside it)
            assert resumed.modes is not None and resumed.modes.current_mode_id == "ask"
            done = await conn.prompt(session_id=session, prompt=[text_block("two")])
            assert done.stop_reason == "end_turn" and client.text() == "Second."
            with pytest.raises(RequestError):
                await conn.close_session(session_id="0" * 32)
        return session

    session = run(scenario())
    finals = [e["data"]["summary"] for e in jmp.log(session) if e["kind"] == "final"]
    assert finals == ["First.", "Second."]


def test_close_during_a_prompt_cancels_it_first(jmp: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    go = jmp.tmp / "never"
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue(
        [{"tool_call": {"arguments": {"command": f"until [ -e {go} ]; do sleep 0.1; done"}}}]
    )

    async def scenario() -> str:
        async with in_process(jmp, monkeypatch) as (_agent, conn, client):
            session = (await conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])).session_id
            turn = asyncio.create_task(conn.prompt(session_id=session, prompt=[text_block("x")]))
            await client.wait_for(lambda u: u.session_update == "tool_call")
            await conn.close_session(session_id=session)
            assert (await asyncio.wait_for(turn, HOLD_S)).stop_reason == "cancelled"
            assert client.of("tool_call_update")[-1].status == "failed"  # its last update came
        return session

    session = run(scenario())
    log = jmp.log(session)
    assert kinds(log)[-1] == "final" and log[-1]["data"]["status"] == "cancelled"
