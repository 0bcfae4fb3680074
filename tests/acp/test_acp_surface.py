"""`jmp --acp`: the rest of the ACP v1 surface an editor shows (issue 34 item 2), through real
`jmp --acp` processes against the loopback model servers: the turn's `plan`, `usage_update`
from the recorded usage, `session_info_update`, the commands a person can type (and that they
work when typed), the mode as a config option, and a running command's heartbeat."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from acp import RequestError

from tests.acp.helpers import acp_agent, run
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)

RUN_IT = {"tool_call": {"arguments": {"command": "echo surfaced"}}}
SLEEP = {"tool_call": {"arguments": {"command": "sleep 60"}}}


def names(update: object) -> list[str]:
    return [c.name for c in update.available_commands]  # type: ignore[attr-defined]


def test_a_turn_shows_its_plan_usage_and_title_and_the_commands_after_new(jmp: Cli) -> None:
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([RUN_IT, {"text": "It printed surfaced."}])

    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            await agent.conn.initialize(protocol_version=1)
            reply = await agent.conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])
            session = reply.session_id
            (option,) = reply.config_options
            assert (option.id, option.category) == ("mode", "mode")
            assert option.current_value == "auto"
            assert [o.value for o in option.options] == ["auto", "ask"]
            client = agent.client
            await client.wait_for(lambda u: u.session_update == "available_commands_update")
            (offered,) = client.of("available_commands_update")
            assert names(offered) == ["compact", "mode"]  # nothing to acknowledge yet
            assert await agent.prompt(session, "run it") == "end_turn"

            plans = client.of("plan")
            assert plans, client.kinds()
            steps = [[(e.content, e.status) for e in p.entries] for p in plans]
            assert all(status != "pending" for plan in steps for _, status in plan)
            during = next(p for p in steps if ("Run echo surfaced", "in_progress") in p)
            route = next(e["data"] for e in jmp.log(session) if e["kind"] == "route")
            chosen = f"Choose the next step: bash ({route['confidence']:.2f})"
            assert during[0] == (chosen, "completed")
            assert ("Write the arguments for bash", "completed") in during
            assert {status for _, status in steps[-1]} == {"completed"}
            assert steps[-1][-1][0] == "Write the answer"

            usage = client.of("usage_update")
            flash = [
                e["data"]["usage"]
                for e in jmp.log(session)
                if e["kind"] == "usage" and e["data"]["provider"] != "typesafe"
            ]
            assert usage and usage[-1].used == flash[-1]["total_tokens"]
            assert usage[-1].size == 96000  # FLASH_CONTEXT_BYTES, jmp's context budget

            infos = client.of("session_info_update")
            assert infos[0].title == "run it"
            final_time = [e["time"] for e in jmp.log(session) if e["kind"] == "final"][-1]
            last = datetime.datetime.fromisoformat(infos[-1].updated_at)
            assert abs(last.timestamp() - final_time) < 0.001
            assert client.text() == "It printed surfaced."  # the conversation is unchanged

        async with acp_agent(jmp, name="second") as again:
            await again.conn.initialize(protocol_version=1)
            await again.conn.resume_session(
                cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
            )
            await again.client.wait_for(lambda u: u.session_update == "usage_update")
            kinds = again.client.kinds()
            assert kinds == ["available_commands_update", "session_info_update", "usage_update"]
            assert again.client.of("session_info_update")[0].title == "run it"
            assert again.client.of("usage_update")[0].used == flash[-1]["total_tokens"]
            listed = await again.conn.list_sessions()
            assert [(s.session_id, s.title) for s in listed.sessions] == [(session, "run it")]

    run(scenario())


def test_the_mode_is_a_config_option_and_a_command_and_compact_works_when_typed(
    jmp: Cli,
) -> None:
    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace)
            client = agent.client
            conn = agent.conn
            answer = await conn.set_config_option(config_id="mode", session_id=session, value="ask")
            assert answer.config_options[0].current_value == "ask"
            assert client.of("current_mode_update")[-1].current_mode_id == "ask"
            with pytest.raises(RequestError) as unknown:
                await conn.set_config_option(config_id="model", session_id=session, value="x")
            assert unknown.value.code == -32602
            with pytest.raises(RequestError):
                await conn.set_config_option(config_id="mode", session_id=session, value="yolo")

            await conn.set_session_mode(mode_id="auto", session_id=session)
            told = client.of("config_option_update")[-1].config_options[0]
            assert told.current_value == "auto"  # set_mode keeps the config option in step

            asked = len(jmp.jev.systemone_bodies())
            assert await agent.prompt(session, "/mode ask") == "end_turn"
            assert client.of("current_mode_update")[-1].current_mode_id == "ask"
            assert client.of("config_option_update")[-1].config_options[0].current_value == ("ask")
            assert client.text().startswith("Mode: ask")
            client.clear()
            assert await agent.prompt(session, "/compact") == "end_turn"
            assert client.text()  # what the compaction did, said
            assert len(jmp.jev.systemone_bodies()) == asked  # neither command asked a model
            assert jmp.flash.completions() == []
        log = jmp.log(session)
        assert [e["data"]["mode"] for e in log if e["kind"] == "mode"] == ["ask", "auto", "ask"]
        kinds = {e["kind"] for e in log}
        assert "compaction" in kinds and "user" not in kinds  # a command is no request

    run(scenario())


def test_a_silent_command_beats_then_acknowledge_is_offered_and_works(jmp: Cli) -> None:
    """A command that prints nothing gets a heartbeat with its elapsed time (JMP_HEARTBEAT_S=1
    here, 10 by default); cancelled, its outcome is unknown, so `/acknowledge` is offered, and
    typing it acknowledges without asking and goes on."""
    jmp.extra_env["JMP_HEARTBEAT_S"] = "1"
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([SLEEP])

    def beats(client: object) -> list[object]:
        return [
            u
            for u in client.of("tool_call_update")  # type: ignore[attr-defined]
            if u.field_meta and "elapsedS" in u.field_meta.get("jmp", {})
        ]

    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace)
            client = agent.client
            turn = asyncio.create_task(agent.prompt(session, "wait a minute"))
            await client.wait_for(lambda _: len(beats(client)) >= 2)
            heard = beats(client)
            elapsed = [u.field_meta["jmp"]["elapsedS"] for u in heard]
            assert elapsed == sorted(elapsed) and elapsed[0] < elapsed[-1]
            assert all(u.status == "in_progress" for u in heard)
            assert "Still running" in heard[-1].content[-1].content.text
            await agent.conn.cancel(session_id=session)
            assert await asyncio.wait_for(turn, 150) == "cancelled"
            offered = client.of("available_commands_update")
            assert names(offered[-1]) == ["compact", "acknowledge", "mode"]

            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Acknowledged; nothing else to do."}])
            client.clear()
            assert await agent.prompt(session, "/acknowledge") == "end_turn"
            assert client.permissions == []  # typed: not asked again
            assert client.text().endswith("Acknowledged; nothing else to do.")
            assert names(client.of("available_commands_update")[-1]) == ["compact", "mode"]
        log = jmp.log(session)
        assert "tool_progress" not in {e["kind"] for e in log}  # transient: never in the log
        stopped = [e["data"] for e in log if e["kind"] == "tool_finished"]
        assert [(e["interrupted"], e["reason"]) for e in stopped] == [(True, "cancelled")]
        ends = [e["data"] for e in log if e["kind"] == "tool_uncertain"]
        assert [(e["cause"], e["acknowledged"]) for e in ends] == [("cancelled", True)]
        assert [e["data"]["text"] for e in log if e["kind"] == "user"] == ["wait a minute"]
        for body in jmp.flash.completions():
            assert "Still running" not in str(body["messages"])

    run(scenario())
