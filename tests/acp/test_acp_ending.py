"""An editor quitting (issue 24 item 5) and a kill while a question is open (item 3): every
request in flight is answered before `jmp --acp` exits, the last updates first; a kill -9 while
the person is asked leaves nothing uncertain."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from typing import Any

import pytest

from tests.acp.helpers import Wire, acp_agent, run
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)
MARK = "sleep 41.357"


def frame(n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": method, "params": params}


def until_frame(wire: Wire, found: Any) -> dict[str, Any]:
    while True:
        message = wire.read()
        if found(message):
            return message


def test_requests_still_in_flight_at_the_end_of_input_are_answered(jmp: Cli) -> None:
    """`printf 'initialize\\nsession/list\\n' | jmp --acp` (as JSON-RPC lines): before, only
    `initialize` was answered; the SDK dropped what was in flight at EOF."""
    wire = Wire(jmp)
    wire.send(frame(1, "initialize", {"protocolVersion": 1}))
    wire.send(frame(2, "session/list", {}))
    code, rest = wire.close()
    replies = [json.loads(line) for line in rest.splitlines()]
    assert code == 0 and [r["id"] for r in replies] == [1, 2], replies
    assert replies[1]["result"] == {"sessions": []}


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_an_editor_quitting_mid_command_gets_the_last_update_and_the_response(
    jmp: Cli, how: str
) -> None:
    jmp.jev.script([{"route": "bash"}])
    started = jmp.tmp / "started"
    jmp.flash.queue([{"tool_call": {"arguments": {"command": f"touch {started}; {MARK}"}}}])
    wire = Wire(jmp, name=how)
    wire.call("initialize", {"protocolVersion": 1})
    session = wire.call("session/new", {"cwd": str(jmp.workspace), "mcpServers": []})
    sid = session["result"]["sessionId"]
    wire.send(frame(9, "session/prompt", {"sessionId": sid, "prompt": [text("run it")]}))
    until_frame(
        wire, lambda m: m.get("params", {}).get("update", {}).get("status") == "in_progress"
    )
    for _ in range(3000):  # until the command runs (a bound on a hang, not a timing)
        if started.exists():
            break
        time.sleep(0.05)
    if how == "sigterm":
        os.kill(wire.proc.pid, signal.SIGTERM)  # stdin stays open: the signal alone ends it
        rest = drained(wire)
        code, _ = wire.close()
    else:
        code, tail = wire.close()
        rest = [json.loads(line) for line in tail.splitlines()]
    assert code == 0
    replies = [f for f in rest if f.get("id") == 9]
    assert replies == [{"jsonrpc": "2.0", "id": 9, "result": {"stopReason": "cancelled"}}], rest
    updates = [
        f["params"]["update"]
        for f in rest[: rest.index(replies[0])]
        if f.get("method") and f["params"]["update"]["sessionUpdate"].startswith("tool_call")
    ]  # the call's updates (the plan, info and commands beside them are issue 34's)
    assert [u.get("status") for u in updates][-1:] == ["failed"], rest  # the call's last update
    log = jmp.log(sid)
    (finished,) = [e["data"] for e in log if e["kind"] == "tool_finished"]
    assert finished["interrupted"] and finished["reason"] == "cancelled"
    shown = updates[-1]["content"][0]["content"]["text"]  # item 6: one statement of the exit
    assert "exit code" not in finished["text"] and "[exit code" not in shown, shown
    assert log[-1]["kind"] == "final" and log[-1]["data"]["status"] == "cancelled"


def drained(wire: Wire) -> list[dict[str, Any]]:
    """Every frame until the agent closes its stdout (it exits)."""
    frames = []
    assert wire.proc.stdout is not None
    while line := wire.proc.stdout.readline():
        wire.lines.append(line)
        frames.append(json.loads(line))
        wire.log.add("agent", frames[-1])
    return frames


def text(words: str) -> dict[str, str]:
    return {"type": "text", "text": words}


def test_the_end_of_input_while_asked_starts_nothing(jmp: Cli) -> None:
    """Ask mode: the input ends while the permission request is open. Our request is ended
    (-32800, no one can answer it now), the prompt answers `cancelled`, nothing started."""
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": "touch never.txt"}}}])
    wire = Wire(jmp)
    wire.call("initialize", {"protocolVersion": 1})
    sid = wire.call("session/new", {"cwd": str(jmp.workspace), "mcpServers": []})["result"][
        "sessionId"
    ]
    wire.call("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    wire.send(frame(9, "session/prompt", {"sessionId": sid, "prompt": [text("touch it")]}))
    until_frame(wire, lambda m: m.get("method") == "session/request_permission")
    code, rest = wire.close()
    replies = [json.loads(line) for line in rest.splitlines()]
    assert code == 0 and {"jsonrpc": "2.0", "id": 9, "result": {"stopReason": "cancelled"}} in (
        replies
    ), replies
    log = jmp.log(sid)
    assert "tool_started" not in [e["kind"] for e in log]
    assert [e["data"]["decision"] for e in log if e["kind"] == "approval"] == ["cancelled"]
    assert not (jmp.workspace / "never.txt").exists()


def test_a_kill_while_asked_leaves_nothing_uncertain_and_the_mode_stays(jmp: Cli) -> None:
    """kill -9 while the permission request is open, then a new process on the same sessions
    directory (as acpx respawns): the load says ask mode, nothing is pending, the next prompt
    asks no question about an interrupted call, and the command never ran."""
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": "touch never.txt"}}}])

    async def killed() -> str:
        async with acp_agent(jmp, name="killed") as agent:
            session = await agent.new(jmp.workspace)
            await agent.conn.set_session_mode(mode_id="ask", session_id=session)
            asked = asyncio.Event()

            async def hang(tool_call: Any, options: Any) -> str:
                asked.set()
                await asyncio.sleep(3600)  # the person never answers: jmp is killed first
                return "allow"

            agent.client.choose = hang
            turn = asyncio.create_task(agent.prompt(session, "touch it"))
            await asyncio.wait_for(asked.wait(), 150)
            os.kill(agent.process.pid, signal.SIGKILL)
            with contextlib.suppress(ConnectionError):
                await asyncio.wait_for(turn, 150)
        return session

    session = run(killed())
    before = jmp.log(session)
    assert not [e for e in before if e["kind"] in ("tool_started", "approval")]

    async def respawned() -> None:
        async with acp_agent(jmp, name="respawned") as agent:
            await agent.conn.initialize(protocol_version=1)
            loaded = await agent.conn.load_session(
                cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
            )
            assert loaded.modes is not None and loaded.modes.current_mode_id == "ask"
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Nothing ran."}])
            assert await agent.prompt(session, "what happened?") == "end_turn"
            assert agent.client.permissions == []  # no interrupted call to ask about
            assert agent.client.text().endswith("Nothing ran.")

    run(respawned())
    assert not (jmp.workspace / "never.txt").exists()
    assert "tool_uncertain" not in [e["kind"] for e in jmp.log(session)]
