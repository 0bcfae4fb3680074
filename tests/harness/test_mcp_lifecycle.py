"""The MCP server's end: stdin EOF and SIGTERM leave `final` and no process; a kill -9
mid-operation is settled by `jev-harness inspect` as tool_uncertain (kernel_exit)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import McpServer, RawClient
from tests.support.workers import pid_running, wait_until

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        harness = HarnessCli(short_tmp, jev)
        harness.extra_env["JMP_WARM"] = "0"  # these tests follow the server's own process tree
        yield harness


def family(pid: int) -> list[int]:
    """The server and every process under it (workers run in their own sessions)."""
    return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]


def test_stdin_eof_writes_final_and_leaves_no_process(cli: HarnessCli) -> None:
    server = McpServer(cli, PICK, INPUTS)  # with Jev: a harness and a router worker
    pids: list[int] = []

    async def main() -> None:
        async with server.connect() as c:
            await c.ok("observe")
            pids.extend(family(server.served()[1]))

    anyio.run(main)  # leaving the client closes the server's stdin
    assert len(pids) >= 3, pids  # the server, its harness worker, its router worker
    wait_until(lambda: not any(pid_running(p) for p in pids), 30, "every process to exit")
    final = server.events()[-1]
    assert final["kind"] == "final" and final["data"]["status"] == "cancelled"
    assert "stdin closed: session" in server.stderr and "SIGTERM" not in server.stderr


def held(cli: HarnessCli) -> tuple[McpServer, Path]:
    hold = cli.tmp / "hold"
    os.mkfifo(hold)
    inputs = {**INPUTS, "hold": str(hold), "hold_item": "a"}
    return McpServer(cli, PICK, inputs, "--direct-only", key=False), Path(f"{hold}.started")


async def hold_then(server: McpServer, started: Path, kill: int) -> list[int]:
    """Start the held operation, send `kill` to the server mid-operation; the family's pids."""
    pids: list[int] = []
    try:
        async with server.connect() as c, anyio.create_task_group() as tg:
            ref = await c.ref()
            args = {"tool": "items.pick", "parameters": {"item": "a"}, "state_ref": ref}
            tg.start_soon(c.call, "operate", args)
            await anyio.to_thread.run_sync(
                wait_until, lambda: started.exists() and started.read_text(), 60, "the hold"
            )
            pids.extend(family(server.served()[1]))
            os.kill(pids[0], kill)
            await anyio.to_thread.run_sync(
                wait_until, lambda: not pid_running(pids[0]), 60, "the server to exit"
            )
            tg.cancel_scope.cancel()
    except BaseException:
        if not pids or pid_running(pids[0]):
            raise  # a failure before the kill is the test's
        # after the kill the client may complain about its dead server: expected
    return pids


def test_sigterm_mid_operation_settles_the_call_and_leaves_no_process(cli: HarnessCli) -> None:
    server, started = held(cli)
    pids = anyio.run(hold_then, server, started, signal.SIGTERM)
    wait_until(lambda: not any(pid_running(p) for p in pids), 30, "every process to exit")
    events = server.events()
    kinds = [e["kind"] for e in events]
    assert kinds[-3:] == ["tool_started", "tool_uncertain", "final"]
    assert events[-2]["data"]["cause"] == "worker_exit"  # the held worker was stopped
    assert events[-1]["data"]["status"] == "blocked"
    assert "SIGTERM" in server.stderr


def test_kill_9_mid_operation_is_settled_by_inspect(cli: HarnessCli) -> None:
    server, started = held(cli)
    pids = anyio.run(hold_then, server, started, signal.SIGKILL)
    wait_until(lambda: not any(pid_running(p) for p in pids), 30, "the orphaned worker to exit")
    session_id = server.served()[0]
    before = cli.events(session_id)
    assert before[-1]["kind"] == "tool_started"
    report = cli.inspect(session_id)
    assert report.code == 0, report.stderr
    assert report.lines[0]["status"] == "blocked"
    after = cli.events(session_id)
    assert [e["kind"] for e in after[len(before) :]] == ["tool_uncertain", "final"]
    assert after[len(before)]["data"]["cause"] == "kernel_exit"
    assert after[len(before)]["data"]["call_id"] == before[-1]["data"]["call_id"]


def test_stdin_eof_deletes_the_owned_camofox_tab_and_shows_no_key(cli: HarnessCli) -> None:
    from jmp_lab.servers.camofox import CamofoxServer
    from jmp_lab.servers.site import MARKER, SiteServer
    from tests.harness.helpers import ROOT

    key = "camofox-access-key-0123456789"
    with SiteServer() as site, CamofoxServer(key=key) as fox:
        fox.state.leak = True  # the server echoes the key wherever it can
        cli.extra_env.update(CAMOFOX_URL=fox.url, CAMOFOX_ACCESS_KEY=key)
        inputs = {
            "url": site.url + "/",
            "allowed_origins": [site.url],
            "markers": [MARKER],
            "output": "report.json",
            "provider": "camofox",
            "camofox_session": "mcp1",
        }
        server = McpServer(cli, ROOT / "examples" / "research_task.py", inputs, "--direct-only")
        seen: dict[str, object] = {}

        async def main() -> None:
            async with server.connect() as c:
                view = await c.ok("observe")  # the entry capture opens the tab
                seen["tabs"] = len(fox.tabs)
                seen["view"] = str(view)

        anyio.run(main)
        assert seen["tabs"] == 1
        assert fox.tabs == {} and len(fox.deleted) == 1  # closed at stdin EOF
    assert key not in str(seen["view"]) + server.stderr
    for path in cli.home.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert server.events()[-1]["kind"] == "final"


def test_a_killed_harness_worker_is_uncertain_and_observe_still_answers(cli: HarnessCli) -> None:
    server, started = held(cli)
    seen: dict[str, object] = {}

    async def main() -> None:
        async with server.connect() as c:
            ref = await c.ref()
            args = {"tool": "items.pick", "parameters": {"item": "a"}, "state_ref": ref}
            async with anyio.create_task_group() as tg:

                async def operate() -> None:
                    seen["operate"] = await c.ok("operate", args)

                tg.start_soon(operate)
                worker = await anyio.to_thread.run_sync(
                    wait_until, lambda: started.exists() and started.read_text(), 60, "the hold"
                )
                os.kill(int(worker), signal.SIGKILL)
            seen["observe"] = await c.ok("observe")
            seen["arguments"] = await c.ok("arguments", {"tool": "items.pick", "state_ref": ref})
            await c.refused("budget_exhausted", "operate", args)

    anyio.run(main)
    assert seen["operate"]["status"] == "uncertain"  # type: ignore[index]
    view = seen["observe"]
    assert view["tools"] == [] and view["final"]["status"] == "blocked"  # type: ignore[index]
    assert seen["arguments"]["options"] == []  # type: ignore[index]
    kinds = [e["kind"] for e in server.events()]
    assert kinds[-3:] == ["tool_started", "tool_uncertain", "final"]
    assert server.kinds("tool_uncertain")[0]["cause"] == "worker_exit"


def test_stdin_eof_during_run_task_cancels_the_run(cli: HarnessCli) -> None:
    cli.jev.fault("delay", seconds=60)  # the first question hangs: the run is mid-decision
    server = McpServer(cli, PICK, INPUTS)
    pids: list[int] = []

    async def main() -> None:
        async with server.connect() as c, anyio.create_task_group() as tg:
            tg.start_soon(c.call, "run_task")
            await anyio.to_thread.run_sync(
                wait_until, lambda: cli.jev.systemone_bodies(), 60, "the first Jev question"
            )
            pids.extend(family(server.served()[1]))
            tg.cancel_scope.cancel()  # then leaving the client closes the server's stdin

    anyio.run(main)
    wait_until(lambda: not any(pid_running(p) for p in pids), 30, "every process to exit")
    final = server.events()[-1]
    assert final["kind"] == "final" and final["data"]["status"] == "cancelled"
    assert server.kinds("tool_started") == []  # cancelled before anything was chosen


def test_a_client_that_only_lists_tools_leaves_no_session_and_no_process(cli: HarnessCli) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    with RawClient(server) as c:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}}
        c.request("initialize", {**params, "clientInfo": {"name": "raw", "version": "1"}})
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert len(c.request("tools/list")["result"]["tools"]) == 3
        pids = family(c.process.pid)  # the server and its harness worker (the task is built)
        assert len(pids) >= 2, pids
        assert c.close() == 0
    wait_until(lambda: not any(pid_running(p) for p in pids), 30, "every process to exit")
    assert not cli.home.exists() or list(cli.home.iterdir()) == []
    assert "no tool was called, so no session was created" in server.stderr
