"""`python -m jev_harness.mcp` driven by clients other than the `mcp` SDK's ClientSession.

fastmcp 4 cannot be installed beside jmp (OpenHands pins fastmcp < 4, fastmcp 4 needs mcp >= 2),
so the handshake half of an exchange it recorded once (fastmcp 4.1.6's `Client(StdioTransport(
...))`, `list_tools()`, `call_tool("observe", {})`, its frames taken with `tee` against a server
that answered its `server/discover` probe with an error, so it fell back to `initialize`) is
replayed here byte for byte by a hand-written stdio client (`RawClient`). Now that the server
answers the probe (MCP 2026-07-28), such a client stays on 2026-07-28: test_mcp_revisions.py
drives that with the mcp 2.x SDK itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import ROOT, SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import McpServer, RawClient, jmp_version
from tests.harness.schema_lint import lint_tools

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}
REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]  # the SDK's handshake ones

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"  # a stateless-revision request's

# fastmcp 4.1.6 (mcp 2.3.0), as it wrote them to the server's stdin.
FASTMCP_4 = [
    '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}}}',
    '{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp","version":"0.1.0"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    '{"jsonrpc":"2.0","id":3,"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"observe","arguments":{},"_meta":{"progressToken":4}}}',
]


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def listed(cli: HarnessCli) -> list[dict[str, Any]]:
    """`jmp --list --json`'s sessions in the server's sessions directory."""
    argv = [sys.executable, str(ROOT / "main.py"), "--list", "--json", "--sessions-dir"]
    done = subprocess.run(
        [*argv, str(cli.home)], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout)["data"]["sessions"])


def error(frame: dict[str, Any]) -> tuple[int, str]:
    assert "result" not in frame, frame
    return frame["error"]["code"], frame["error"]["message"]


def test_fastmcp_4s_exchange_and_what_no_sdk_client_sends(cli: HarnessCli) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    with RawClient(server) as c:
        # An initialize-revision client that sends a request before initialize: told to.
        code, text = error(c.request("tools/list"))
        assert code == -32600 and "initialize" in text and "2025-11-25" in text

        c.send(FASTMCP_4[1])
        init = c.response(2)["result"]
        assert init["protocolVersion"] == "2025-11-25"
        assert init["serverInfo"] == {"name": "jev-harness", "version": jmp_version()}
        assert "run_task" not in init["instructions"]  # --direct-only offers no delegation
        c.send(FASTMCP_4[2])
        c.send(FASTMCP_4[3])
        listed_tools = c.response(3)["result"]["tools"]
        assert [t["name"] for t in listed_tools] == ["observe", "arguments", "operate"]
        assert lint_tools(listed_tools) == {}  # the Inspector's --strict checks, on the wire
        refused = c.request("tools/call", {"name": "run_task", "arguments": {}})["result"]
        assert refused["isError"] is True and refused["structuredContent"]["code"] == "direct_only"
        assert listed(cli) == []  # listing tools, or a call refused at the door, leaves none
        c.send(FASTMCP_4[4])
        observed = c.response(4)["result"]
        assert observed["isError"] is False and observed["structuredContent"]["state_ref"]
        [row] = listed(cli)  # the first tool call created it
        assert row["session_id"] == observed["structuredContent"]["session_id"]

        code, text = error(c.request("resources/subscribe/nope", {}))
        assert code == -32601 and all(revision in text for revision in REVISIONS)
        code, text = error(c.send_raw(FASTMCP_4[0], 1))  # the probe after initialize
        assert code == -32601 and "initialize" in text
        enveloped = c.request("tools/list", {"_meta": {VERSION_KEY: "2026-07-28"}})
        code, text = error(enveloped)  # a 2026-07-28 request on an initialize connection
        assert code == -32600 and "2026-07-28" in text
        code, text = error(c.request("tools/call", {"arguments": {}}))  # no tool name
        assert code == -32602 and "tools/call" in text and "name" in text
        assert c.close() == 0
    lines = server.stderr.splitlines()
    # Only the server's own named lines: no SDK warning, no traceback (96 lines before).
    assert all(line.startswith(("jev-harness-mcp: ", "jmp: ")) for line in lines), lines
    assert len(lines) <= 5, lines
    assert not [f for f in c.frames if "method" in f]  # no request or notification of its own
