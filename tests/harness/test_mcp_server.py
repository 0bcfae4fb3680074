"""`python -m jev_harness.mcp` through the `mcp` SDK's stdio client: tools, a direct session to a
completed receipt, delegation (run_task first, the delegate alias) and the --archive mirror."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import JEV_KEY, SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import (
    EXAMPLE,
    MARKER,
    Client,
    McpServer,
    RawClient,
    jmp_version,
    workspace,
)

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}
CLOSED = {"observe", "arguments", "operate", "run_task"}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def test_the_tool_list_with_and_without_direct_only(cli: HarnessCli) -> None:
    full = McpServer(cli, PICK, INPUTS)
    direct = McpServer(
        cli, PICK, INPUTS, "--direct-only", key=False, module="apixly_jev_harness.mcp"
    )
    with RawClient(full) as c:  # a client of a newer revision than the SDK's newest
        params = {"protocolVersion": "2099-01-01", "capabilities": {}}
        init = c.request("initialize", {**params, "clientInfo": {"name": "raw", "version": "1"}})
        assert init["result"]["protocolVersion"] == "2025-11-25"  # one the server speaks
        assert init["result"]["serverInfo"]["version"] == jmp_version()
        assert "run_task" in init["result"]["instructions"]
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = {t["name"]: t for t in c.request("tools/list")["result"]["tools"]}
        assert set(tools) == CLOSED  # delegate is callable, not listed
        for tool in tools.values():
            assert tool["inputSchema"]["additionalProperties"] is False
            assert tool["description"]
        assert set(tools["operate"]["inputSchema"]["required"]) == {
            "tool",
            "parameters",
            "state_ref",
        }
        call = {"name": "observe", "arguments": {}}
        view = c.request("tools/call", call)["result"]["structuredContent"]
        assert view["delegation"]["available"] is True
        assert view["delegation"]["same_tools_and_verifier"] is True
        assert c.close() == 0

    async def main() -> None:
        async with direct.connect() as c:
            assert "run_task" not in c.initialized.instructions  # type: ignore[operator]
            assert c.initialized.serverInfo.version == jmp_version()
            names = [t.name for t in (await c.session.list_tools()).tools]
            assert names == ["observe", "arguments", "operate"]
            view = await c.ok("observe")
            assert view["delegation"] == {
                "available": False,
                "route": None,
                "direct_only": True,
                "same_tools_and_verifier": True,
            }
            await c.refused("direct_only", "run_task")
            await c.refused("direct_only", "delegate")

    anyio.run(main)
    assert direct.kinds("run_started")[0]["model"] == ""  # no Jev in a direct-only session
    assert direct.kinds("tool_started") == []


async def _choose(c: Client, tool: str, ref: str, pick: Any = None) -> dict[str, str]:
    """Every parameter of `tool` through `arguments`, dependent ones given their parents."""
    chosen: dict[str, str] = {}
    while True:
        step = await c.ok("arguments", {"tool": tool, "parents": chosen, "state_ref": ref})
        assert step["state_ref"] == ref  # asking creates nothing
        if step["parameter"] is None:
            return chosen
        options = step["options"]
        assert options, step
        name = step["parameter"]["name"]
        if tool == "record_evidence" and name == "passage":
            assert step["parameter"]["depends_on"] == ["label"]
        choice = pick(name, options) if pick else options[0]["id"]
        chosen[name] = choice


async def _operate(c: Client, tool: str, ref: str) -> dict[str, Any]:
    parameters = await _choose(c, tool, ref)
    out = await c.ok("operate", {"tool": tool, "parameters": parameters, "state_ref": ref})
    assert out["state_ref"] != ref  # every operation changes the state
    assert len(out["text"]) <= 2_000
    return out


def test_a_direct_session_reaches_a_completed_receipt_and_the_archive_mirrors_the_log(
    cli: HarnessCli,
) -> None:
    inputs = workspace(cli)
    archive = cli.tmp / "archive.jsonl"
    server = McpServer(
        cli, EXAMPLE, inputs, "--direct-only", "--archive", str(archive), key=False, goal="codename"
    )
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with server.connect() as c:
            view = await c.ok("observe")
            ref = view["state_ref"]
            assert view["goal"] == "codename" and view["artifact"]["exists"] is False
            assert (await c.ok("observe"))["state_ref"] == ref  # observing changes nothing
            offered = {t["name"]: t for t in view["tools"]}
            assert "files.search" in offered
            for tool in offered.values():
                assert all(
                    {"name", "selection", "depends_on"} <= set(p) for p in tool["parameters"]
                )
            for tool in ("files.search", "files.read", "record_evidence"):
                out = await _operate(c, tool, ref)
                assert out["status"] == "ok", out
                ref = out["state_ref"]
            record = {t["name"] for t in (await c.ok("observe"))["tools"]}
            assert "save_report" in record
            seen["last"] = await _operate(c, "save_report", ref)
            seen["view"] = await c.ok("observe")

    anyio.run(main)
    last = seen["last"]
    assert last["complete"] is True
    artifact = last["artifact"]
    assert artifact["match"] is True and artifact["exists"] is True
    assert artifact["path"] == str(cli.cwd / "r.json")
    report = json.loads((cli.cwd / "r.json").read_text())
    assert any(MARKER in r["quote"] for r in report["records"])
    assert seen["view"]["artifact"] == artifact
    events = server.events()
    assert events[-1]["kind"] == "final" and events[-1]["data"]["status"] == "completed"
    assert len(server.kinds("tool_started")) == 4 == len(server.kinds("tool_finished"))
    assert {p["method"] for p in server.kinds("parameter")} == {"caller"}
    assert {r["method"] for r in server.kinds("route")} == {"caller"}
    assert server.kinds("receipt")[0]["match"] is True
    log = cli.home / server.served()[0] / "events.jsonl"
    assert archive.read_bytes() == log.read_bytes()  # byte for byte, final included


STEPS = [
    {"tool": "files.search"},
    {"tool": "files.read"},
    {"tool": "record_evidence"},
    {"tool": "save_report"},
]


def test_run_task_as_the_first_call_returns_the_receipt(cli: HarnessCli) -> None:
    cli.jev.script(STEPS)
    server = McpServer(cli, EXAMPLE, workspace(cli), goal="codename")
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with server.connect() as c:
            seen["run"] = await c.ok("run_task")
            seen["again"] = await c.ok("delegate")  # the run is over: its result again
            view = await c.ok("observe")
            assert view["delegation"]["route"] == "delegate"
            await c.refused("route_fixed", "operate", {"tool": "x", "parameters": {}})

    anyio.run(main)
    run = seen["run"]
    assert run["status"] == "completed" and run["session_id"] == server.served()[0]
    assert run["artifact"]["match"] is True and run["artifact"]["record_count"] == 1
    assert seen["again"]["status"] == "completed"
    assert [r["method"] for r in server.kinds("route")] == ["jev"] * 4
    assert len(server.kinds("final")) == 1
    assert JEV_KEY not in server.stderr + json.dumps(seen)
    assert JEV_KEY.encode() not in (cli.home / run["session_id"] / "events.jsonl").read_bytes()


def test_delegate_is_an_unadvertised_alias_of_run_task(cli: HarnessCli) -> None:
    cli.jev.script([{"items.pick.item": "b"}])
    server = McpServer(cli, PICK, INPUTS)
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with server.connect() as c:
            seen["run"] = await c.ok("delegate")
            await c.refused("unknown_tool", "nope")
            await c.refused("invalid_arguments", "run_task", {"goal": "x"})

    anyio.run(main)
    assert seen["run"]["status"] == "completed"
    assert [p["choice"] for p in server.kinds("parameter")] == ["b"]


@pytest.mark.parametrize(
    ("extra", "key", "named"),
    [
        ((), False, "TYPESAFE_API_KEY"),
        (("--max-steps", "0"), False, "--max-steps"),
        (("--archive", "/dev/null/a.jsonl", "--direct-only"), False, "--archive"),  # no dir
    ],
)
def test_a_server_that_cannot_start_names_why_and_exits_2(
    cli: HarnessCli, extra: tuple[str, ...], key: bool, named: str
) -> None:
    argv = [sys.executable, "-m", "jev_harness.mcp", str(PICK), "--goal", "g", "--inputs", "{}"]
    done = subprocess.run(
        [*argv, "--sessions-dir", str(cli.home), *extra],
        cwd=cli.cwd,
        env=cli.env(key),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and named in done.stderr
    assert done.stdout == ""  # nothing but MCP frames on stdout: here, none
    assert not cli.home.exists() or not any(cli.home.iterdir())


def readme_config(cli: HarnessCli) -> tuple[str, list[str], dict[str, str]]:
    """docs/JEV-HARNESS.md's `mcpServers` snippet with its /home/me paths pointed at this test: the
    console script of this venv, the example of this checkout."""
    from tests.harness.helpers import ROOT

    text = (ROOT / "docs" / "JEV-HARNESS.md").read_text()
    blocks = [b.split("```")[0] for b in text.split("```json")[1:]]
    block = next(b for b in blocks if "jev-harness-mcp" in b)
    (entry,) = json.loads(block)["mcpServers"].values()
    proj = cli.cwd / "proj"
    places = {
        "/home/me/jmp/.venv/bin/": f"{Path(sys.executable).parent}/",
        "/home/me/jmp/": f"{ROOT}/",
        "/home/me/proj": str(proj),
        "/home/me/": f"{cli.tmp}/",
    }
    command, *args = [entry["command"], *entry["args"]]
    for old, new in places.items():
        command = command.replace(old, new)
        args = [arg.replace(old, new) for arg in args]
    assert command.endswith("/jev-harness-mcp") and set(entry["env"]) == {"TYPESAFE_API_KEY"}
    return command, args, entry["env"]


def test_the_readme_mcp_servers_snippet_starts_a_working_server(cli: HarnessCli) -> None:
    workspace(cli)
    command, args, _env = readme_config(cli)
    server = McpServer(cli, EXAMPLE, {})
    server.params = server.params.model_copy(update={"command": command, "args": args})
    cli.jev.script(STEPS)

    async def main() -> None:
        async with server.connect() as c:
            assert (await c.ok("observe"))["goal"] == "Find the release codename"
            run = await c.ok("run_task")
            assert run["status"] == "completed" and run["artifact"]["match"] is True

    anyio.run(main)
    assert (cli.tmp / "jev-harness-archive.jsonl").read_bytes() == (
        cli.tmp / ".jmp" / "sessions" / server.served()[0] / "events.jsonl"
    ).read_bytes()


def test_the_entry_capture_is_taken_at_the_first_tool_call_not_at_listing(
    cli: HarnessCli,
) -> None:
    from jmp_lab.servers.site import MARKER as SITE_MARKER
    from jmp_lab.servers.site import SiteServer
    from tests.harness.helpers import ROOT

    with SiteServer() as site:
        inputs = {
            "url": site.url + "/",
            "allowed_origins": [site.url],
            "markers": [SITE_MARKER],
            "output": "report.json",
        }
        server = McpServer(cli, ROOT / "examples" / "research_task.py", inputs, "--direct-only")
        seen: dict[str, Any] = {}

        async def main() -> None:
            async with server.connect() as c:
                await c.session.list_tools()
                await c.session.list_tools()
                made = sorted(cli.home.iterdir()) if cli.home.exists() else []
                seen["listed"] = (made, site.count("/"))  # no session yet, nothing fetched
                ref = await c.ref()
                seen["observed"] = (len(server.kinds("tool_started")), site.count("/"))
                assert await c.ref() == ref  # the capture happened once, before the first ref

        anyio.run(main)
    assert seen["listed"] == ([], 0)
    assert seen["observed"] == (1, 1)
    started = server.kinds("tool_started")
    assert [s["tool"] for s in started] == ["web.open_link"]
