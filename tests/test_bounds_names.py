"""Issue 9 items 9 and 18, through the CLI: names that are not UTF-8, links out of the workspace,
and an MCP call that times out records its real duration (item 21)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers import MCP_SERVER
from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import Cli, short_dir, tool_call

FAKE_MCP = MCP_SERVER


@pytest.fixture
def cli() -> Iterator[Cli]:
    tmp = short_dir()
    try:
        with JevServer() as jev, FlashServer() as flash:
            yield Cli(tmp, jev, flash)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_dot(cli: Cli) -> tuple[list[str], dict[str, object], str]:
    """One run that reads `.`: (run_started listing, tool_finished data, full output text)."""
    cli.jev.script([{"route": "read"}, {"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([tool_call(path="."), {"text": "Listed."}])
    run = cli.run("--workspace", str(cli.workspace), "--no-mcp", "list the workspace")
    assert run.code == 0, run.stderr[-3000:]
    assert run.result["status"] == "completed"
    finished = run.of("tool_finished")[0]
    assert finished["status"] == "ok", finished
    full = (cli.home / run.result["session_id"] / str(finished["full_output"])).read_text()
    return run.of("run_started")[0]["listing"], finished, full


def test_a_name_that_is_not_utf8_is_shown_escaped(cli: Cli) -> None:
    """Item 9: a file named b'bad\\xff.txt' does not fail the run; run_started's listing and
    the `read .` view show it as `bad\\xff.txt`."""
    with open(os.fsencode(cli.workspace) + b"/bad\xff.txt", "wb") as f:
        f.write(b"z")
    (cli.workspace / "sub").mkdir()
    with open(os.fsencode(cli.workspace) + b"/sub/caf\xe9", "wb") as f:
        f.write(b"z")
    listing, finished, full = _read_dot(cli)
    assert "bad\\xff.txt" in listing and "sub/caf\\xe9" in listing
    assert "bad\\xff.txt" in str(finished["text"]) and "sub/caf\\xe9" in full


def test_read_dot_lists_a_linked_directory_without_entering_it(cli: Cli) -> None:
    """Item 18: a link to a directory outside the workspace is listed as a link (`@`), never
    entered: no name from outside appears in the view, the listing or the full output."""
    outside = cli.tmp / "outside"
    outside.mkdir()
    (outside / "OUTSIDE_SECRET_NAME.txt").write_text("x")
    (cli.workspace / "inner").mkdir()
    (cli.workspace / "inner" / "kept.txt").write_text("y")
    (cli.workspace / "link").symlink_to(outside, target_is_directory=True)
    listing, finished, full = _read_dot(cli)
    assert "link" in listing and not any("OUTSIDE" in name for name in listing)
    assert "inner/kept.txt" in str(finished["text"])
    assert f"{cli.workspace}/link@" in full
    assert "OUTSIDE_SECRET_NAME" not in full


def test_timed_out_mcp_call_records_its_real_duration(short_tmp: Path) -> None:
    """Item 21: an MCP call that times out took as long as its limit, not `seconds: 0.0`."""
    from kernel.config.mcp import load_servers
    from kernel.supervision.tools import Tools

    config = {"mcpServers": {"fx": {"command": sys.executable, "args": [FAKE_MCP], "env": {}}}}
    (short_tmp / "mcp.json").write_text(json.dumps(config))
    (short_tmp / "ws").mkdir()
    tools = Tools(short_tmp / "ws", short_tmp / "terminal", load_servers(short_tmp / "mcp.json"))
    try:
        result = tools.run("c1", "mcp.slow", {"seconds": 60}, timeout_s=0.5)
        assert result.status == "error" and "timed out" in result.error
        assert result.seconds >= 0.5
        answered = tools.run("c2", "mcp.echo", {"text": "hi"})
        assert answered.text == "hi" and answered.seconds > 0.0
    finally:
        tools.close()
