"""What a person at a terminal and a replay are shown (issue 9 items 2, 3, 13), on both paths.

Moved here from tests/test_secrets_reach.py, where it ran on the suite's default path only:
the answer carries all four keys, then an `ask` question carries them with terminal escape
sequences; the result line, its replay and the readable view show each key redacted and no
escape byte. Its own runs (the VIEW surface exists on the CLI alone): the routing and answer
workers, no tool worker.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.security.frontends import REOPEN, VIEW, needs
from tests.security.scenarios import Cell
from tests.security.world import ESCAPES, fresh_keys
from tests.support.cli import Cli, Run, session_bytes, short_dir

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def cli(cell: Cell) -> Iterator[Cli]:
    cell.spawn.prepare()
    tmp = short_dir()
    with JevServer() as jev, FlashServer() as flash:
        cli = Cli(tmp, jev, flash)
        cli.extra_env = fresh_keys() | cell.spawn.env()
        yield cli
    shutil.rmtree(tmp, ignore_errors=True)


def _assert_no_key(cli: Cli, *runs: Run, sid: str) -> None:
    bodies = json.dumps([r["body"] for r in cli.jev.requests + cli.flash.requests], default=str)
    everything = "".join(run.stdout + run.stderr for run in runs) + bodies
    stored = session_bytes(cli.home / sid).decode("utf-8", "replace")
    for name in ("TYPESAFE_API_KEY", "FLASH_API_KEY", "DEEPSEEK_API_KEY", "CAMOFOX_ACCESS_KEY"):
        key = cli.extra_env[name]
        assert key not in everything, f"{name} leaked to stdout, stderr or a model request"
        assert key not in stored, f"{name} leaked into the session's files"


@needs(VIEW, REOPEN)
def test_every_key_is_redacted_from_the_result_line_the_view_and_replay(
    cell: Cell, cli: Cli
) -> None:
    keys = [cli.extra_env[k] for k in sorted(cli.extra_env) if k.endswith("_KEY")]
    answer = "keys: " + " ".join(keys)
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([{"text": answer}])
    run = cli.run("--workspace", str(cli.workspace), "--no-mcp", "say hi")
    assert run.code == 0, run.stderr[-3000:]
    sid = run.result["session_id"]
    assert run.result["summary"].count("[REDACTED]") == 4
    assert run.of("final")[-1]["summary"] == run.result["summary"]
    replay = cli.run("--session", sid)
    assert replay.code == 0 and replay.result["summary"] == run.result["summary"]
    # the readable view: an `ask` question with the keys and terminal escape sequences
    cli.jev.script([{"route": "ask"}])
    cli.flash.queue([{"text": f"which one? {answer} {ESCAPES} done"}])
    view = cli.run("--session", sid, "and now?", json_flag=False)
    assert view.code == 2, view.stderr[-3000:]
    assert "[REDACTED]" in view.stdout and "which one?" in view.stdout
    assert "\x1b" not in view.stdout + view.stderr and "\x07" not in view.stdout
    assert "\x9b" not in view.stdout and "\\x1b]0;pwned-title\\x07" in view.stdout
    _assert_no_key(cli, run, replay, view, sid=sid)
