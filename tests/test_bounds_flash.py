"""Issue 9 items 20 and 9 (model text), through the CLI against the loopback Flash server:
Flash's output is capped (an endless answer is cut and marked, endless arguments are invalid
output), and a lone surrogate in its answer is repaired, in its arguments refused."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import Cli, short_dir, tool_call

ANSWER_CAP = 50_000
ARGUMENTS_CAP = 40_000


@pytest.fixture
def cli() -> Iterator[Cli]:
    tmp = short_dir()
    try:
        with JevServer() as jev, FlashServer() as flash:
            cli = Cli(tmp, jev, flash)
            cli.extra_env = {
                "JMP_FLASH_ANSWER_CHARS": str(ANSWER_CAP),
                "JMP_FLASH_ARGUMENTS_CHARS": str(ARGUMENTS_CAP),
            }
            yield cli
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_endless_arguments_and_lone_surrogates_are_invalid_output_or_repaired(cli: Cli) -> None:
    """Endless arguments stop at the cap and are invalid output (no tool runs); arguments
    holding "\\ud800" are refused; an answer holding one is repaired to U+FFFD."""
    routes = [{"route": "bash"}, {"route": "bash"}, {"route": "done"}]
    cli.jev.script([*routes, {"completion_review": "complete"}])
    cli.flash.fault("flood", chars=0)  # the first request streams arguments without end
    cli.flash.queue(
        [
            tool_call(command="flooded"),
            tool_call(command="echo \ud800 > never.txt"),
            {"text": "All fine \ud800 here."},
        ]
    )
    first = cli.run("--workspace", str(cli.workspace), "--no-mcp", "do it")
    assert first.code == 0, first.stderr[-3000:]
    assert first.result["status"] == "completed"
    assert "tool_started" not in first.kinds()  # never a tool with partial or invalid arguments
    errors = first.of("error")
    assert [e["error_class"] for e in errors] == ["InvalidArguments", "InvalidArguments"]
    assert f"exceed {ARGUMENTS_CAP} characters" in errors[0]["message"]
    assert "lone surrogate" in errors[1]["message"]
    assert first.result["summary"] == "All fine \ufffd here."
    assert not (cli.workspace / "never.txt").exists()


def test_an_endless_answer_is_cut_at_the_cap_and_marked(cli: Cli) -> None:
    """An answer that never ends is cut at the cap, marked, and stored and printed bounded."""
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.fault("flood", chars=0)
    second = cli.run("--workspace", str(cli.workspace), "--no-mcp", "answer at length")
    assert second.code == 0, second.stderr[-3000:]
    summary = second.result["summary"]
    assert second.result["status"] == "completed"
    assert summary.startswith("y" * 1000) and "[answer cut at 50000 characters" in summary
    assert len(summary) < ANSWER_CAP + 500
    assert len(second.stdout) < 3 * ANSWER_CAP + 20_000  # final + result, each bounded
    assert cli.log_path(second.result["session_id"]).stat().st_size < 3 * ANSWER_CAP + 50_000
