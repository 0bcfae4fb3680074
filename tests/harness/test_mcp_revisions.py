"""Both eras of MCP on `python -m jev_harness.mcp`: 2026-07-28 (stateless, `server/discover`)
and the `initialize` revisions; every tool's outputSchema and hints; progress; cancellation.

The 2026-07-28 frames are checked against the revision's own JSON Schema
(tests/harness/data/mcp-2026-07-28.schema.json, schema/2026-07-28/schema.json of
modelcontextprotocol/modelcontextprotocol at b0f60ba5), and driven by clients nobody here
wrote: the mcp 2.x SDK's `Client` (in `make install`'s `.venv/mcp-2026-07-28`, since it
cannot be imported beside jmp's mcp 1.x) and the MCP Inspector CLI (`npx`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import ROOT, SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import McpServer, RawClient, jmp_version
from tests.harness.schema_lint import lint_tools
from tests.support.workers import wait_until

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}
SPEC = json.loads((Path(__file__).parent / "data" / "mcp-2026-07-28.schema.json").read_text())
MODERN_PYTHON = ROOT / ".venv" / "mcp-2026-07-28" / "bin" / "python"
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def spec_valid(frame: dict[str, Any], definition: str) -> None:
    """`frame` is a valid `definition` of MCP 2026-07-28's schema.json."""
    schema = {**SPEC, "$ref": f"#/$defs/{definition}"}
    jsonschema.Draft202012Validator(schema).validate(frame)


def modern(c: RawClient, method: str, params: dict[str, Any] | None = None, **meta: Any) -> Any:
    return c.request(method, {**(params or {}), "_meta": {**ENVELOPE, **meta}})


def fits(result: dict[str, Any], tool: dict[str, Any]) -> None:
    """The result's structuredContent fits the tool's outputSchema; its text says the same."""
    structured, text = result["structuredContent"], result["content"][0]["text"]
    jsonschema.Draft202012Validator(tool["outputSchema"]).validate(structured)
    if result["isError"]:
        assert text.split()[0] == structured["code"]
    else:
        assert json.loads(text) == structured


def test_a_2026_07_28_connection_frame_by_frame_against_the_revision_schema(
    cli: HarnessCli,
) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    with RawClient(server) as c:
        # Not the probe first: a 2026-07-28 request is served inline (no initialize).
        listed = modern(c, "tools/list")
        spec_valid(listed, "ListToolsResultResponse")
        tools = {t["name"]: t for t in listed["result"]["tools"]}
        assert list(tools) == ["observe", "arguments", "operate"]

        found = modern(c, "server/discover")
        spec_valid(found, "DiscoverResultResponse")
        result = found["result"]
        assert result["supportedVersions"] == ["2026-07-28"] and "tools" in result["capabilities"]
        info = result["_meta"]["io.modelcontextprotocol/serverInfo"]
        assert info == {"name": "jev-harness", "version": jmp_version()}
        assert "run_task" not in result["instructions"]  # --direct-only

        observed = modern(c, "tools/call", {"name": "observe", "arguments": {}})
        spec_valid(observed, "CallToolResultResponse")
        fits(observed["result"], tools["observe"])
        ref = observed["result"]["structuredContent"]["state_ref"]
        chosen = modern(
            c,
            "tools/call",
            {"name": "arguments", "arguments": {"tool": "items.pick", "state_ref": ref}},
        )
        spec_valid(chosen, "CallToolResultResponse")
        fits(chosen["result"], tools["arguments"])
        stale = modern(
            c,
            "tools/call",
            {"name": "operate", "arguments": {"tool": "items.pick", "parameters": {}}},
        )
        assert stale["result"]["isError"] is True
        spec_valid(stale, "CallToolResultResponse")
        fits(stale["result"], tools["operate"])  # a refusal fits the schema too
        pong = modern(c, "ping")
        spec_valid(pong, "JSONRPCResultResponse")

        unsupported = c.request("tools/list", {"_meta": {**ENVELOPE, ENVELOPE_KEY: "2099-01-01"}})
        spec_valid(unsupported, "UnsupportedProtocolVersionError")
        assert unsupported["error"]["data"] == {
            "supported": ["2026-07-28"],
            "requested": "2099-01-01",
        }
        bare = c.request("tools/list", {"_meta": {ENVELOPE_KEY: "2026-07-28"}})
        spec_valid(bare, "JSONRPCErrorResponse")
        spec_valid(bare["error"], "InvalidParamsError")
        assert "clientCapabilities" in bare["error"]["message"]
        again = c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        spec_valid(again, "UnsupportedProtocolVersionError")  # no handshake on this connection
        unknown = modern(c, "resources/list")
        spec_valid(unknown, "JSONRPCErrorResponse")
        spec_valid(unknown["error"], "MethodNotFoundError")
        assert c.close() == 0
    assert not [f for f in c.frames if f.get("id") == "jev-harness-gate/initialize"]
    assert not [f for f in c.frames if "method" in f]  # no request or notification of its own


ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"


def test_an_initialize_connection_refuses_the_2026_envelope_and_has_the_same_tools(
    cli: HarnessCli,
) -> None:
    server = McpServer(cli, PICK, INPUTS)
    with RawClient(server) as c:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}}
        init = c.request("initialize", {**params, "clientInfo": {"name": "raw", "version": "1"}})
        assert init["result"]["protocolVersion"] == "2025-06-18"
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        refused = modern(c, "tools/list")
        assert refused["error"]["code"] == -32600 and "initialize" in refused["error"]["message"]
        tools = c.request("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == ["observe", "arguments", "operate", "run_task"]
        assert lint_tools(tools) == {}  # the Inspector's --strict rules, outputSchema included
        hints = {t["name"]: tuple(t["annotations"][h] for h in HINTS) for t in tools}
        assert hints == {
            "observe": (True, False, True, False),
            "arguments": (True, False, True, False),
            "operate": (False, True, True, True),
            "run_task": (False, True, True, True),
        }
        for tool in tools:
            assert tool["outputSchema"]["type"] == "object" and tool["annotations"]["title"]
        observed = c.request("tools/call", {"name": "observe", "arguments": {}})["result"]
        fits(observed, tools[0])
        assert "resultType" not in observed  # a 2025 result stays as that revision has it
        assert c.close() == 0


def test_run_task_reports_progress_and_a_cancel_stops_the_run_cleanly(cli: HarnessCli) -> None:
    cli.jev.fault("delay", seconds=60)  # the first question hangs: the run is mid-decision
    server = McpServer(cli, PICK, INPUTS)
    with RawClient(server) as c:
        run = {"name": "run_task", "arguments": {}}
        c.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {**run, "_meta": {**ENVELOPE, "progressToken": "p7"}},
            }
        )
        first = c.notification("notifications/progress")["params"]
        assert first["progressToken"] == "p7" and "delegated run running" in first["message"]
        wait_until(lambda: cli.jev.systemone_bodies(), 60, "the first Jev question")
        busy = modern(c, "tools/call", {"name": "observe", "arguments": {}})
        assert busy["result"]["structuredContent"]["code"] == "busy"
        c.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "user"},
            }
        )

        def settled() -> dict[str, Any] | None:
            answer = modern(c, "tools/call", {"name": "observe", "arguments": {}})["result"]
            return None if answer["isError"] else answer["structuredContent"]

        view = wait_until(settled, 60, "the cancelled run to end")
        assert view["final"]["status"] == "cancelled"  # type: ignore[index]
        pong = modern(c, "ping")  # the connection still answers
        assert pong["result"]["resultType"] == "complete"
        assert c.close() == 0
    assert not [f for f in c.frames if f.get("id") == 7]  # no response for a cancelled request
    progress = [
        f["params"]["progress"] for f in c.frames if f.get("method") == "notifications/progress"
    ]
    assert progress == sorted(set(progress))  # it only ever grows
    session_id = server.served()[0]
    inspected = cli.inspect(session_id)
    assert inspected.code == 0, inspected.stderr
    kinds = [e["kind"] for e in server.events()]
    assert kinds[-1] == "final" and "tool_started" not in kinds


def test_an_operation_cancelled_midway_runs_to_its_end_and_is_recorded(cli: HarnessCli) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    with RawClient(server) as c:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}}
        c.request("initialize", {**params, "clientInfo": {"name": "raw", "version": "1"}})
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ref = c.request("tools/call", {"name": "observe", "arguments": {}})["result"]
        state = ref["structuredContent"]["state_ref"]
        chosen = {"tool": "items.pick", "parameters": {"item": "b"}, "state_ref": state}
        c.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "operate", "arguments": chosen, "_meta": {"progressToken": 9}},
            }
        )
        c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})

        def settled() -> dict[str, Any] | None:
            answer = c.request("tools/call", {"name": "observe", "arguments": {}})["result"]
            return None if answer["isError"] else answer["structuredContent"]

        view = wait_until(settled, 60, "the operation to end")
        assert c.close() == 0
    assert not [f for f in c.frames if f.get("id") == 9 and "method" not in f]
    assert cli.inspect(server.served()[0]).code in (0, 2)  # inspectable: it reads cleanly
    kinds = [e["kind"] for e in server.events()]
    assert "tool_uncertain" not in kinds
    assert kinds.count("tool_started") == kinds.count("tool_finished")  # every call settled
    assert view["state_ref"]


def _modern_client(server: McpServer, mode: str) -> dict[str, Any]:
    if not MODERN_PYTHON.exists():
        pytest.skip(f"no mcp 2.x SDK in {MODERN_PYTHON.parent.parent} (make install puts it there)")
    p = server.params
    spec = {"command": p.command, "args": p.args, "env": p.env, "cwd": p.cwd, "mode": mode}
    script = Path(__file__).parent / "mcp_modern_client.py"
    done = subprocess.run(
        [str(MODERN_PYTHON), str(script), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_mcp_2x_sdk_client_of_either_era(cli: HarnessCli, mode: str) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    seen = _modern_client(server, mode)
    # auto: the server/discover probe succeeds, so the client stays on 2026-07-28
    assert seen["protocol_version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert seen["server"]["name"] == "jev-harness"
    assert seen["server"]["version"] == jmp_version()
    tools = {t["name"]: t for t in seen["tools"]}
    assert list(tools) == ["observe", "arguments", "operate"]
    assert all(set(HINTS) <= set(t["annotations"]) for t in tools.values())
    observed, options = seen["observe"], seen["arguments"]
    assert observed["isError"] is False and options["isError"] is False
    fits(observed, tools["observe"])  # the SDK itself checked them against outputSchema too
    fits(options, tools["arguments"])
    assert [o["id"] for o in options["structuredContent"]["options"]] == ["a", "b", "c"]


def _inspector(server: McpServer, *args: str) -> subprocess.CompletedProcess[str]:
    npx = shutil.which("npx")
    if npx is None or shutil.which("node") is None:
        pytest.skip("no node/npx: the MCP Inspector CLI cannot run here")
    p = server.params
    argv = [npx, "--prefer-offline", "-y", INSPECTOR, "--cli", *args, "--format", "json"]
    argv += ["--cwd", str(p.cwd), "--", p.command, *p.args]
    env = {**os.environ, **(p.env or {})}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0 and any(
        mark in done.stderr
        for mark in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "E404")
    ):
        pytest.skip(f"npm cannot fetch {INSPECTOR}: {done.stderr.strip().splitlines()[-1]}")
    return done


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_mcp_inspector_cli_strict(cli: HarnessCli, era: str) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    listed = _inspector(server, "--method", "tools/list", "--strict", "--protocol-era", era)
    assert listed.returncode == 0, listed.stderr  # 6 on any error-severity schema finding
    tools = json.loads(listed.stdout)["result"]["tools"]
    assert [t["name"] for t in tools] == ["observe", "arguments", "operate"]
    assert all(t["outputSchema"] and set(HINTS) <= set(t["annotations"]) for t in tools)
    called = _inspector(
        server, "--method", "tools/call", "--tool-name", "observe", "--protocol-era", era
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)["result"]
    assert result["structuredContent"]["state_ref"]
    fits(result, tools[0])
