"""`jmp --acp` end to end: initialize, new, prompts with live tool calls, load, list."""

from __future__ import annotations

import pytest

from tests.acp.helpers import acp_agent, run
from tests.support.cli import FLASH_KEY, JEV_KEY, Cli

# Each test starts real ACP processes and workers; on a loaded shared machine that alone
# can take a minute, so the per-test limit is wider than the suite default.
pytestmark = pytest.mark.timeout(300)

WRITE = {"tool_call": {"arguments": {"path": "hello.py", "file_text": "print('hello')\n"}}}
RUN = {"tool_call": {"arguments": {"command": "python3 hello.py"}}}
EDIT = {
    "tool_call": {
        "arguments": {
            "command": "str_replace",
            "path": "hello.py",
            "old_str": "hello",
            "new_str": "world",
        }
    }
}


def test_initialize_negotiates_the_version_and_states_true_capabilities(jmp: Cli) -> None:
    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            asked_latest = await agent.conn.initialize(protocol_version=1)
            asked_future = await agent.conn.initialize(protocol_version=99)
            assert asked_latest.protocol_version == 1
            assert asked_future.protocol_version == 1  # the agent's latest, not an echo
            caps = asked_latest.agent_capabilities
            assert caps.load_session is True
            assert caps.prompt_capabilities.image is False
            assert caps.prompt_capabilities.embedded_context is True
            assert caps.mcp_capabilities.http is True and caps.mcp_capabilities.sse is True
            assert caps.session_capabilities.list is not None
            (method,) = asked_latest.auth_methods  # no terminal auth asked: the agent kind
            assert method.id == "jmp-setup" and getattr(method, "type", None) is None

    run(scenario())


def test_multi_step_prompt_follow_up_and_load(jmp: Cli) -> None:
    jmp.jev.script(
        [{"route": c} for c in ("write", "bash", "edit", "bash", "done")]
        + [{"completion_review": "complete"}]
    )
    jmp.flash.queue([WRITE, RUN, EDIT, RUN, {"text": "hello.py now prints world."}])

    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace)
            assert await agent.prompt(session, "make hello.py print world") == "end_turn"
            client = agent.client
            kinds = client.shown(session)
            assert kinds == ["tool_call", "tool_call_update"] * 4 + ["agent_message_chunk"]
            assert "Writing the arguments for write…" in client.thoughts()  # between calls
            starts = client.of("tool_call")
            assert [s.kind for s in starts] == ["edit", "execute", "edit", "execute"]
            assert all(s.status == "in_progress" for s in starts)
            assert starts[0].title == "Write hello.py"
            assert starts[0].locations[0].path == str(jmp.workspace.resolve() / "hello.py")
            assert [s.locations[0].line for s in starts if s.kind == "edit"] == [1, 1]
            assert starts[1].title == "Run python3 hello.py"
            ends = client.of("tool_call_update")
            assert [e.tool_call_id for e in ends] == [s.tool_call_id for s in starts]
            assert all(e.status == "completed" for e in ends)
            assert "world" in ends[3].content[0].content.text
            diff = ends[2].content[1]
            assert (diff.type, diff.old_text, diff.new_text) == ("diff", "hello", "world")
            assert client.text() == "hello.py now prints world."
            assert (jmp.workspace / "hello.py").read_text() == "print('world')\n"

            client.clear()
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Nothing else to do."}])
            assert await agent.prompt(session, "anything else?") == "end_turn"
            assert client.shown() == ["agent_message_chunk"]
            assert client.text() == "Nothing else to do."
        assert agent.process.returncode == 0
        log = jmp.log(session)
        assert [e["data"]["text"] for e in log if e["kind"] == "user"] == [
            "make hello.py print world",
            "anything else?",
        ]

        async with acp_agent(jmp, name="second") as again:
            await again.conn.initialize(protocol_version=1)
            listed = await again.conn.list_sessions()
            assert [s.session_id for s in listed.sessions] == [session]
            assert listed.sessions[0].cwd == str(jmp.workspace.resolve())
            await again.conn.load_session(
                cwd=str(jmp.workspace), session_id=session, mcp_servers=[]
            )
            replay = again.client.shown()
            assert replay == (
                ["user_message_chunk"]
                + ["tool_call", "tool_call_update"] * 4
                + ["agent_message_chunk", "user_message_chunk", "agent_message_chunk"]
            )
            messages = [u.content.text for u in again.client.of("user_message_chunk")]
            assert messages == ["make hello.py print world", "anything else?"]
        assert again.process.returncode == 0
        raw = (jmp.home / session / "events.jsonl").read_text()
        for secret in (JEV_KEY, FLASH_KEY):
            assert secret not in raw
            assert secret not in agent.stderr.read_text()

    run(scenario())
