"""Sessions for the store tests: one completed session made through the CLI per module.

Use as `template = pytest.fixture(scope="module")(make_template)`, then `copied(jmp, template)`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import Cli


def completed_session(jmp: Cli) -> str:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "first answer"}])
    out = jmp.task("say hello")
    assert out.code == 0, out.stderr
    return str(out.result["session_id"])


def make_template() -> Iterator[Path]:
    """One completed session made through the CLI, copied by the tests that only need one."""
    tmp = Path(tempfile.mkdtemp(prefix="jt", dir="/tmp"))
    try:
        with JevServer() as jev, FlashServer() as flash:
            made = Cli(tmp, jev, flash)
            sid = completed_session(made)
        yield made.home / sid
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def copied(jmp: Cli, template: Path) -> str:
    """The template session, copied into this test's sessions dir and bound to this test's
    workspace; returns its id."""
    jmp.home.mkdir(parents=True, exist_ok=True)
    target = jmp.home / template.name
    shutil.copytree(template, target, symlinks=True)
    log = target / "events.jsonl"
    bound = json.loads(log.read_bytes().splitlines()[0])["data"]["workspace"]
    log.write_text(log.read_text().replace(json.dumps(bound), json.dumps(str(jmp.workspace))))
    return template.name
