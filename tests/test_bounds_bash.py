"""Issue 9 items 6, 10 and 14, through the CLI: what a bash call may cost the session's storage,
how long it may run and how much it may print, and that its full output is kept."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import Cli, short_dir, tool_call

MB = 1_000_000


@pytest.fixture
def cli() -> Iterator[Cli]:
    tmp = short_dir()
    try:
        with JevServer() as jev, FlashServer() as flash:
            yield Cli(tmp, jev, flash)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _bash_run(cli: Cli, *calls: dict[str, object]) -> tuple[str, list[dict[str, object]]]:
    """One run of `calls` bash steps then done: (session id, tool_finished records)."""
    routes = [{"route": "bash"} for _ in calls]
    cli.jev.script([*routes, {"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([tool_call(**call) for call in calls] + [{"text": "Done."}])
    run = cli.run("--workspace", str(cli.workspace), "--no-mcp", "run the commands", timeout=280)
    assert run.result["status"] == "completed", (run.result, run.of("error"), run.stderr[-2000:])
    return str(run.result["session_id"]), run.of("tool_finished")


@pytest.mark.timeout(300)  # a cold tool worker on a loaded 2-core machine takes a minute
def test_a_megabyte_command_costs_the_cache_and_the_log_a_bounded_amount(cli: Cli) -> None:
    """Item 6: a 1 MB heredoc command is not copied onto every recall page nor stored twice in
    the log: memory.sqlite3 (+ WAL) stays a small multiple of the input, the log lines bounded;
    the whole command is in the request artifact."""
    body = "\n".join(f"{n:07d} " + "x" * 992 for n in range(MB // 1000))
    command = f"cat > big.txt <<'EOF'\n{body}\nEOF"
    cli.extra_env = {"JMP_FLASH_ARGUMENTS_CHARS": str(3 * MB)}
    cli.flash.state.chunk_chars = 65_536  # 8-character SSE chunks would make 125,000 events
    sid, finished = _bash_run(cli, {"command": command})
    assert finished[0]["exit_code"] == 0, finished
    assert (cli.workspace / "big.txt").read_text() == body + "\n"
    directory = cli.home / sid
    cache = sum(p.stat().st_size for p in directory.glob("memory.sqlite3*"))
    assert cache < 4 * len(command), cache
    log = cli.log_path(sid).read_text().splitlines()
    assert max(len(line) for line in log) < 20_000
    started = next(json.loads(x)["data"] for x in log if '"kind":"tool_started"' in x)
    assert "more characters in the request artifact]" in started["target"]
    request = json.loads((directory / started["request"]).read_text())
    assert request["arguments"]["command"] == command and request["target"] == command


def _artifact(cli: Cli, sid: str, rel: object) -> Path:
    return cli.home / sid / str(rel)


@pytest.mark.timeout(300)
def test_never_ending_commands_stop_at_the_limits_and_absurd_timeouts_are_clamped(
    cli: Cli,
) -> None:
    """Item 10: `yes` stops at the output cap and `sleep` at the time limit, each an honest
    tool_finished (exit_code -1, interrupted, reason) with its process tree gone; timeouts of
    1e308, NaN or -5 are clamped to the configured limit, never taken as given."""
    cli.extra_env = {"JMP_BASH_TIMEOUT_S": "3", "JMP_BASH_OUTPUT_BYTES": "200000"}
    sid, finished = _bash_run(
        cli,
        {"command": "yes"},
        {"command": "sleep 1000.123", "timeout": 1e308},
        {"command": "pgrep -f 'sleep 1000[.]123' || echo NONE-LEFT"},
        {"command": "echo fine-nan", "timeout": float("nan")},
        {"command": "echo fine-negative", "timeout": -5},
    )
    capped, timed, check, nan, negative = finished
    assert (capped["exit_code"], capped["interrupted"], capped["reason"]) == (
        -1,
        True,
        "output_cap",
    )
    assert capped["status"] == "error" and "JMP_BASH_OUTPUT_BYTES" in str(capped["error"])
    full = _artifact(cli, sid, capped["full_output"]).read_text()
    assert full.startswith("y\ny\n") and "[output cut at 200000 bytes" in full
    assert len(full.encode()) < 200_000 + 10_000
    assert (timed["exit_code"], timed["interrupted"], timed["reason"]) == (-1, True, "timeout")
    assert "JMP_BASH_TIMEOUT_S" in str(timed["error"])
    assert "NONE-LEFT" in str(check["text"])
    assert (nan["exit_code"], negative["exit_code"]) == (0, 0)
    assert "fine-nan" in str(nan["text"]) and "fine-negative" in str(negative["text"])
    request = json.loads(
        _artifact(cli, sid, f"artifacts/{timed['call_id']}.request.json").read_text()
    )
    assert request["arguments"]["timeout"] == 3.0


@pytest.mark.timeout(300)
def test_full_output_is_complete_past_openhands_30000_character_cut(cli: Cli) -> None:
    """Item 14: OpenHands cuts terminal output at 30,000 characters (and 10,000 lines); the
    full_output artifact still holds every line, and tool_finished says its preview is cut."""
    sid, finished = _bash_run(
        cli, {"command": "seq 1 12000"}, {"command": "printf 'z%.0s' $(seq 1 40000); echo END"}
    )
    numbers, line = finished
    assert numbers["exit_code"] == 0 and numbers["truncated"] is True
    full = _artifact(cli, sid, numbers["full_output"]).read_text()
    assert full.startswith("1\n2\n3\n")  # no "[Previous command outputs are truncated]"
    assert "\n".join(str(n) for n in range(1, 12001)) + "\n" in full
    long_line = _artifact(cli, sid, line["full_output"]).read_text()
    assert "z" * 40000 + "END" in long_line
