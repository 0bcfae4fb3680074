"""`jmp --acp`: cancel mid-stream, one prompt per session, missing keys, the session lock."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from acp import RequestError

from acp_server.translator import CUT_OFF
from tests.acp.helpers import acp_agent, run
from tests.support.cli import FLASH_KEY, ROOT, Cli
from tests.support.warm import workers_of

# Each test starts real ACP processes and workers; on a loaded shared machine that alone
# can take a minute, so the per-test limit is wider than the suite default.
pytestmark = pytest.mark.timeout(300)

LONG_ANSWER = "This answer streams slowly. " * 40


async def until(condition: object, timeout: float = 180) -> None:
    """Wait for a condition on the loopback servers (they record requests as they arrive)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, "condition not met"
        await asyncio.sleep(0.05)


def answer_requested(jmp: Cli) -> bool:
    return any(not body.get("tools") for body in jmp.flash.completions())


def test_cancel_during_a_streamed_answer_then_a_new_prompt(jmp: Cli) -> None:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.fault("slow", count=1, seconds=0.3)  # per 8-character chunk
    jmp.flash.queue([{"text": LONG_ANSWER}])

    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace)
            turn = asyncio.create_task(agent.prompt(session, "explain slowly"))
            await until(lambda: answer_requested(jmp))
            with pytest.raises(RequestError, match="already has a prompt running"):
                await agent.prompt(session, "a second prompt meanwhile")
            # Issue 24 item 2: the answer streams as it is generated.
            await agent.client.wait_for(lambda u: u.session_update == "agent_message_chunk")
            await agent.conn.cancel(session_id=session)
            assert await asyncio.wait_for(turn, 150) == "cancelled"
            streamed = agent.client.text()
            assert streamed.endswith(CUT_OFF), streamed  # and says it was cut off, unrecorded
            assert LONG_ANSWER.startswith(streamed[: -len(CUT_OFF)])
            agent.client.clear()
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Short answer."}])
            assert await agent.prompt(session, "briefly then") == "end_turn"
            assert agent.client.text() == "Short answer."

            agent.client.clear()  # a provider error: the redacted error is the message
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.fault("http500", count=10)
            assert await agent.prompt(session, "and now?") == "end_turn"
            said = agent.client.text()
            assert "could not be written" in said and FLASH_KEY not in said
            jmp.flash.clear_faults()
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Recovered."}])
            assert await agent.prompt(session, "retry") == "end_turn"
            assert agent.client.text().endswith("Recovered.")
        finals = [e["data"]["status"] for e in jmp.log(session) if e["kind"] == "final"]
        assert finals == ["cancelled", "completed", "error", "completed"]
        users = [e["data"]["text"] for e in jmp.log(session) if e["kind"] == "user"]
        assert users == ["explain slowly", "briefly then", "and now?", "retry"]

    run(scenario())


def test_a_missing_key_is_a_clear_error_and_records_nothing(jmp: Cli) -> None:
    no_jev = jmp.env()
    del no_jev["TYPESAFE_API_KEY"]
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "Hi."}])

    async def scenario() -> str:
        async with acp_agent(jmp, env=no_jev, name="nokey") as agent:
            with pytest.raises(RequestError) as refused:
                await agent.new(jmp.workspace)
            assert "TYPESAFE_API_KEY" in str(refused.value)
        assert not jmp.home.exists() or not any(jmp.home.iterdir())
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace)
            assert await agent.prompt(session, "hello") == "end_turn"
        before = jmp.log(session)
        async with acp_agent(jmp, env=no_jev, name="nokey2") as agent:
            await agent.conn.initialize(protocol_version=1)
            await agent.conn.load_session(
                cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
            )
            assert agent.client.text() == "Hi."  # a replay needs no key
            with pytest.raises(RequestError) as refused:
                await agent.prompt(session, "a refused prompt")
            assert "TYPESAFE_API_KEY" in str(refused.value)
        assert agent.process.returncode == 0
        assert jmp.log(session) == before  # no user record, nothing at all
        return session

    session = run(scenario())
    listing = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "--list", "--json"],
        env=jmp.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert session in listing.stdout


def test_a_second_process_on_a_session_in_use_names_the_holder(jmp: Cli) -> None:
    async def scenario() -> None:
        async with acp_agent(jmp, name="first") as first:
            session = await first.new(jmp.workspace)
            async with acp_agent(jmp, name="second") as second:
                await second.conn.initialize(protocol_version=1)
                with pytest.raises(RequestError) as refused:
                    await second.conn.load_session(
                        cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
                    )
                assert f"process {first.process.pid}" in str(refused.value)
                assert not second.client.updates
            cli = await asyncio.to_thread(
                jmp.run, "--session", session, "from the command line", timeout=60
            )
            assert cli.code == 2 and f"process {first.process.pid}" in cli.stderr
        assert first.process.returncode == 0
        users = [e for e in jmp.log(session) if e["kind"] == "user"]
        assert users == []  # neither refused writer recorded anything

    run(scenario())


def test_idle_sessions_beyond_the_warm_limit_stop_their_workers(jmp: Cli) -> None:
    def workers(pid: int) -> int:
        return len(workers_of(pid))  # router, generator, tool per warm session

    def script() -> None:
        jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
        jmp.flash.queue([{"text": "ok"}])

    async def scenario() -> None:
        env = jmp.env() | {"JMP_ACP_WARM_SESSIONS": "1"}
        async with acp_agent(jmp, env=env) as agent:
            first = await agent.new(jmp.workspace)
            second = await agent.conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])
            script()
            assert await agent.prompt(first, "one") == "end_turn"
            assert workers(agent.process.pid) == 3
            script()
            assert await agent.prompt(second.session_id, "two") == "end_turn"
            await until(lambda: workers(agent.process.pid) == 3)  # the first one's stopped
            script()
            assert await agent.prompt(first, "one again") == "end_turn"  # fresh workers
            await until(lambda: workers(agent.process.pid) == 3)
        assert agent.process.returncode == 0
        assert [e["data"]["status"] for e in jmp.log(first) if e["kind"] == "final"] == [
            "completed",
            "completed",
        ]

    run(scenario())


def test_one_process_runs_prompts_of_two_sessions_at_once(jmp: Cli) -> None:
    def answers() -> int:
        return sum(not body.get("tools") for body in jmp.flash.completions())

    def script(*texts: str) -> None:
        jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}] * len(texts))
        jmp.flash.queue([{"text": text} for text in texts])

    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            one = await agent.new(jmp.workspace)
            two = (await agent.conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])).session_id
            script("warm one", "warm two")  # both sessions' workers up first
            assert await agent.prompt(one, "warm up") == "end_turn"
            assert await agent.prompt(two, "warm up") == "end_turn"
            agent.client.clear()
            script(LONG_ANSWER, "Quick.")
            jmp.flash.fault("slow", count=1, seconds=1.0)  # the first answer streams ~140 s
            slow = asyncio.create_task(agent.prompt(one, "the long one"))
            await until(lambda: answers() == 3)
            # the second session's whole turn runs while the first one is still streaming
            assert await agent.prompt(two, "the quick one") == "end_turn"
            assert not slow.done(), [(e["kind"], e["data"]) for e in jmp.log(one)[-3:]]
            await agent.conn.cancel(session_id=one)
            assert await asyncio.wait_for(slow, 150) == "cancelled"

            def said(session: str) -> str:
                chunks = agent.client.updates
                return "".join(
                    u.content.text
                    for s, u in chunks
                    if s == session and u.session_update == "agent_message_chunk"
                )

            assert said(two) == "Quick."
            streamed = said(one)  # what streamed of the long one, then the cut-off note
            assert not streamed or LONG_ANSWER.startswith(streamed.removesuffix(CUT_OFF))

    run(scenario())
