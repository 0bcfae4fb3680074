"""`jmp --acp`: the client's own MCP servers join the configured ones for its session."""

from __future__ import annotations

import json
import sys

import pytest
from acp import RequestError
from acp.schema import EnvVariable, McpServerStdio

from jmp_lab.servers import MCP_SERVER
from tests.acp.helpers import acp_agent, run
from tests.support.cli import Cli

# Each test starts real ACP processes and workers; on a loaded shared machine that alone
# can take a minute, so the per-test limit is wider than the suite default.
pytestmark = pytest.mark.timeout(300)

SERVER = MCP_SERVER
SECRET = "client-mcp-secret-4242"


def client_server(name: str, *args: str) -> McpServerStdio:
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=[SERVER, *args],
        env=[EnvVariable(name="FAKE_TOKEN", value=SECRET)],
    )


def test_the_clients_mcp_server_is_used_in_its_session(jmp: Cli) -> None:
    configured = {"configured": {"command": sys.executable, "args": [SERVER, "--prefix", "c_"]}}
    (jmp.tmp / "mcp.json").write_text(json.dumps({"mcpServers": configured}))
    jmp.jev.script(
        [
            {"route": "mcp.echo"},
            {"route": "mcp.getenv"},
            {"route": "done"},
            {"completion_review": "complete"},
        ]
    )
    jmp.flash.queue(
        [
            {"tool_call": {"arguments": {"text": "hi from the client"}}},
            {"tool_call": {"arguments": {"name": "FAKE_TOKEN"}}},
            {"text": "Echoed."},
        ]
    )

    async def scenario() -> str:
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace, mcp_servers=[client_server("mine")])
            assert await agent.prompt(session, "use the client's tools") == "end_turn"
            starts = agent.client.of("tool_call")
            assert [s.kind for s in starts] == ["other", "other"]
            assert starts[0].title == "MCP mine: echo"  # its server, then the tool
            ends = agent.client.of("tool_call_update")
            assert ends[0].status == "completed"
            assert "hi from the client" in ends[0].content[0].content.text
            assert "[REDACTED]" in ends[1].content[0].content.text
            with pytest.raises(RequestError, match="name clash"):
                await agent.conn.new_session(
                    cwd=str(jmp.workspace), mcp_servers=[client_server("configured")]
                )
        assert SECRET not in agent.stderr.read_text()
        return session

    session = run(scenario())
    offered = jmp.jev.systemone_bodies()[0]["questions"]["route"]["criteria"]
    assert {"mcp.echo", "mcp.c_echo"} <= set(offered)  # the client's and the configured
    for path in (jmp.home / session).rglob("*"):
        if path.is_file() and path.suffix in {".jsonl", ".json", ".txt"}:
            assert SECRET not in path.read_text(errors="replace"), path


def test_a_tool_name_clash_ends_the_turn_as_in_the_cli(jmp: Cli) -> None:
    configured = {"configured": {"command": sys.executable, "args": [SERVER]}}
    (jmp.tmp / "mcp.json").write_text(json.dumps({"mcpServers": configured}))

    async def scenario() -> None:
        async with acp_agent(jmp) as agent:
            session = await agent.new(jmp.workspace, mcp_servers=[client_server("mine")])
            assert await agent.prompt(session, "anything") == "end_turn"
            said = agent.client.text()
            assert "clash" in said and "configured" in said and "mine" in said
        assert [e["data"]["status"] for e in jmp.log(session) if e["kind"] == "final"] == ["error"]
        assert not jmp.jev.systemone_bodies()

    run(scenario())
