"""Every rejection code of the MCP server, in HARNESS.md's precedence, with no tool_started."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import Client, McpServer
from tests.support.workers import wait_until

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}
STALE = "0" * 64
SECRETISH = "/etc/passwd-body-SECRET-4242"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def op(tool: str, parameters: dict[str, str], ref: str | None) -> dict[str, object]:
    args: dict[str, object] = {"tool": tool, "parameters": parameters}
    if ref is not None:
        args["state_ref"] = ref
    return args


async def before_any_operation(c: Client, ref: str) -> None:
    pick = "items.pick"
    await c.refused("stale_state", "operate", op(pick, {"item": "a"}, STALE))
    await c.refused("stale_state", "operate", op(pick, {"item": "a"}, None))  # required over MCP
    await c.refused("stale_state", "arguments", {"tool": pick, "parents": {}, "state_ref": STALE})
    await c.refused("stale_state", "arguments", {"tool": pick, "parents": {}})
    await c.refused("stale_state", "operate", op(pick, {}, STALE))  # stale before incomplete
    await c.refused("incomplete", "operate", op(pick, {}, ref))
    await c.refused("incomplete", "operate", op(pick, {"item": "a", "x": "y"}, ref))
    await c.refused("incomplete", "operate", op(pick, {"item": "zz", "x": "y"}, ref))  # > unoffered
    text = await c.refused("unoffered", "operate", op(pick, {"item": SECRETISH}, ref))
    assert SECRETISH not in text  # a rejection never echoes what was sent
    text = await c.refused("unoffered", "operate", op(SECRETISH, {}, ref))
    assert SECRETISH not in text
    await c.refused("unoffered", "operate", op("items.note", {"item": "a"}, ref))  # empty domain
    # arguments for a tool not offered is an answer, not a refusal
    assert (await c.ok("arguments", {"tool": "items.note", "state_ref": ref}))["options"] == []
    text = await c.refused("invalid_arguments", "operate", {**op(pick, {}, ref), "x": SECRETISH})
    assert SECRETISH not in text
    assert c.server.kinds("tool_started") == []


def test_each_rejection_code_in_precedence_writes_no_tool_started(cli: HarnessCli) -> None:
    server = McpServer(cli, PICK, INPUTS, "--max-steps", "2")

    async def main() -> None:
        async with server.connect() as c:
            ref = await c.ref()
            await before_any_operation(c, ref)
            first = await c.ok("operate", op("items.pick", {"item": "a"}, ref))
            ref = first["state_ref"]
            assert await c.ref() == ref
            await c.refused("route_fixed", "run_task")
            await c.refused("route_fixed", "delegate")
            await c.refused("repeated_operation", "operate", op("items.pick", {"item": "a"}, ref))
            await c.refused("stale_state", "operate", op("items.pick", {"item": "a"}, STALE))
            assert len(server.kinds("tool_started")) == 1
            second = await c.ok("operate", op("items.pick", {"item": "c"}, ref))
            ref = second["state_ref"]
            for args in (
                op("items.pick", {"item": "b"}, ref),
                op("items.pick", {"item": "b"}, STALE),  # budget before stale
                op("items.pick", {"item": "a"}, ref),  # budget before repeated
                op("items.pick", {}, ref),  # budget before incomplete
            ):
                text = await c.refused("budget_exhausted", "operate", args)
                assert "max steps" in text
            await c.refused("route_fixed", "run_task")  # route before budget
            view = await c.ok("observe")  # observe is never refused but for busy
            assert view["limits"]["steps_taken"] == 2 and view["state_ref"] == ref
            options = await c.ok("arguments", {"tool": "items.pick", "state_ref": ref})
            assert [o["id"] for o in options["options"]] == ["b"]

    anyio.run(main)
    assert len(server.kinds("tool_started")) == 2
    assert server.events()[-1]["data"]["status"] == "blocked"  # max steps, not completed


def test_a_second_call_while_one_is_in_flight_is_busy_not_queued(cli: HarnessCli) -> None:
    hold = cli.tmp / "hold"
    os.mkfifo(hold)
    inputs = {**INPUTS, "hold": str(hold), "hold_item": "a"}
    server = McpServer(cli, PICK, inputs, "--direct-only", key=False)
    started = Path(f"{hold}.started")

    async def main() -> None:
        async with server.connect() as c:
            ref = await c.ref()
            results: list[object] = []

            async def held() -> None:
                results.append(await c.ok("operate", op("items.pick", {"item": "a"}, ref)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(held)
                await anyio.to_thread.run_sync(
                    wait_until, lambda: started.exists() and started.read_text(), 60, "the hold"
                )
                await c.refused("busy", "observe")
                await c.refused("busy", "arguments", {"tool": "items.pick", "state_ref": STALE})
                await c.refused("busy", "run_task")  # busy before direct_only
                await c.refused("busy", "operate", op("items.pick", {"item": "b"}, ref))
                assert len(server.kinds("tool_started")) == 1  # the held call's only
                hold.write_text("go")  # releases the held operation
            assert results and results[0]["status"] == "ok"  # type: ignore[index]
            after = await c.ok("operate", op("items.pick", {"item": "b"}, results[0]["state_ref"]))  # type: ignore[index]
            assert after["complete"] is True  # nothing queued ran in between

    anyio.run(main)
    assert len(server.kinds("tool_started")) == 2
    assert server.events()[-1]["data"]["status"] == "completed"
