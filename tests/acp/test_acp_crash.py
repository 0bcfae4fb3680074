"""kill -9 of `jmp --acp` mid-command: the next load shows the call as unknown, the next
prompt asks the person, and once acknowledged it continues without re-running the command.
A tool worker killed mid-command is a row of the matrix (tests/security/test_crash.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import pytest
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

from tests.acp.helpers import acp_agent, left_running, run
from tests.support.cli import Cli

# Each test starts real ACP processes and workers; on a loaded shared machine that alone
# can take a minute, so the per-test limit is wider than the suite default.
pytestmark = pytest.mark.timeout(300)

COMMAND = "echo ran >> effect.txt; sleep 30.8765"


def effect_lines(jmp: Cli) -> int:
    path = jmp.workspace / "effect.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_kill_9_mid_command_then_load_ask_and_continue(jmp: Cli) -> None:
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": COMMAND}}}])

    async def crash() -> str:
        async with acp_agent(jmp, name="killed") as agent:
            session = await agent.new(jmp.workspace)
            turn = asyncio.create_task(agent.prompt(session, "run the slow job"))
            await agent.client.wait_for(lambda u: u.session_update == "tool_call")
            while effect_lines(jmp) == 0:
                await asyncio.sleep(0.05)
            os.kill(agent.process.pid, signal.SIGKILL)
            with contextlib.suppress(ConnectionError):
                await asyncio.wait_for(turn, 150)
        assert agent.process.returncode == -signal.SIGKILL
        return session

    session = run(crash())
    assert not left_running(jmp, "sleep 30.8765"), (
        "a worker or the command outlived the killed agent"
    )
    assert effect_lines(jmp) == 1

    async def resume() -> None:
        async with acp_agent(jmp, name="resumed") as agent:  # respawned, as acpx does
            client = agent.client
            await agent.conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=Implementation(name="acpx-like", version="0"),
            )
            await agent.conn.load_session(
                cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
            )
            shown = client.shown()
            assert shown == ["user_message_chunk", "tool_call", "tool_call_update"]
            thoughts = "".join(u.content.text for u in client.of("agent_thought_chunk"))
            assert "Writing the arguments for bash" in thoughts  # as it was shown live
            (replayed,) = client.of("tool_call_update")
            assert replayed.status == "failed" and "unknown" in replayed.content[0].content.text

            client.choice = "stop"
            routed = len(jmp.jev.systemone_bodies())
            assert await agent.prompt(session, "carry on") == "end_turn"
            (asked, options) = client.permissions[0]
            assert "bash" in asked.content[0].content.text
            assert "sleep 30.8765" in asked.content[0].content.text
            assert {o.kind for o in options} == {"allow_once", "reject_once"}
            said = client.text()  # blocked: the reason is the message, in an editor's words
            assert "Acknowledge" in said and "--ack-interrupted" not in said
            assert len(jmp.jev.systemone_bodies()) == routed  # blocked: no model was asked

            client.clear()  # approve as acpx does: the first option of kind allow_once
            client.choose = lambda _call, options: next(
                o.option_id for o in options if o.kind == "allow_once"
            )
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Checked: it ran once."}])
            assert await agent.prompt(session, "carry on, it is fine") == "end_turn"
            assert len(client.permissions) == 2
            assert client.text() == "Checked: it ran once."
            assert [u.status for u in client.of("tool_call_update")] == ["failed"]
        assert agent.process.returncode == 0

    run(resume())
    assert effect_lines(jmp) == 1  # never re-run
    log = jmp.log(session)
    records = [e["data"] for e in log if e["kind"] == "tool_uncertain"]
    assert [(r["cause"], r["acknowledged"]) for r in records] == [
        ("kernel_exit", False),
        ("kernel_exit", True),
    ]
    assert [e["data"]["status"] for e in log if e["kind"] == "final"] == ["blocked", "completed"]
    assert not left_running(jmp, "sleep 30.8765")
