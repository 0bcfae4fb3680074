"""Every example command of both seeds, as written (shared/seeds/000_*.txt, the backend contract,
and 003_*.txt, jev-harness; hidden tests are written against them).

The commands below are copied from the seeds verbatim. What is substituted, and only that: the
programs (`python` is this interpreter, `jev-harness` its console script), the example URL and
its origin (a loopback site: https://docs.example.org cannot be reached), `<source marker>` in
the research example (the site's marker), the synopsis placeholders (`[--workspace PATH]
[--no-mcp]`, `ID`). The MCP example runs word for word: its `permitted-corpus` is made here,
and its quotes hold the literal `<source marker>`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from jmp_lab.servers.jev import JevServer
from jmp_lab.servers.site import MARKER, SiteServer
from tests.harness.helpers import HarnessCli
from tests.support.cli import ROOT, Cli

# shared/seeds/000_ab7a4b27c9bc7251.txt, "Entry points"
CONTRACT = [
    'python main.py --json [--workspace PATH] [--no-mcp] "task"',
    'python main.py --json --session ID "follow-up"',
    "python main.py --json --session ID",
    "python main.py --json --session ID --compact",
    "python main.py --json --list",
]
# shared/seeds/003_bc52aa2ccaae4938.txt
CHECK_TASK = "jev-harness check-task examples/research_task.py"
RUN = (
    "jev-harness run examples/research_task.py --goal 'Investigate the requested categories and "
    """save sourced quotes' --inputs '{"url":"https://docs.example.org/","allowed_origins":["""
    """"https://docs.example.org"],"markers":{"requirements":"<source marker>"},"output":"""
    """"local-results/research.json"}' --max-steps 20 --timeout 120"""
)
MCP = (
    "python -m apixly_jev_harness.mcp examples/workspace_task.py --goal 'Investigate source "
    """evidence and save quotes' --inputs '{"root":"permitted-corpus","queries":["""
    """"relevant_identifier"],"markers":{"implementation":"<source marker>"},"output":"""
    """"local-results/workspace.json"}' --context '{}' --max-steps 20 --timeout 120 """
    "--archive local-results/session.jsonl"
)
JEV_HARNESS = str(Path(sys.executable).parent / "jev-harness")


def argv(command: str, substitutions: dict[str, str] | None = None) -> list[str]:
    """The command's words, after the text substitutions; the program made this Python's."""
    for placeholder, value in (substitutions or {}).items():
        command = command.replace(placeholder, value)
    words = shlex.split(command)
    return [{"python": sys.executable, "jev-harness": JEV_HARNESS}[words[0]], *words[1:]]


def run_readable(cli: HarnessCli, words: list[str]) -> subprocess.CompletedProcess[str]:
    """A command as written (no --json: the readable output), sessions under cli.home."""
    env = cli.env() | {"JMP_SESSIONS_DIR": str(cli.home)}
    return subprocess.run(
        words, cwd=cli.cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )


@pytest.fixture
def harness(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        cli = HarnessCli(short_tmp, jev)
        shutil.copytree(ROOT / "examples", cli.cwd / "examples")  # "from a repository checkout"
        yield cli


def test_the_contracts_entry_points_as_written(jmp: Cli) -> None:
    jmp.jev.script([
        {"route": "done"}, {"completion_review": "complete"},
        {"route": "done"}, {"completion_review": "complete"},
    ])  # fmt: skip
    jmp.flash.queue([{"text": "first answer"}, {"text": "second answer"}])
    options = {"[--workspace PATH] [--no-mcp]": f"--workspace {jmp.workspace} --no-mcp"}
    first = jmp.exec(argv(CONTRACT[0], options), cwd=ROOT)
    assert first.code == 0 and first.result["status"] == "completed", first.stderr
    sid = first.result["session_id"]
    expected = ["completed", "completed", "compacted"]
    for command, status in zip(CONTRACT[1:4], expected, strict=True):
        run = jmp.exec(argv(command, {"ID": sid}), cwd=ROOT)
        assert run.code == 0 and run.result["status"] == status, (command, run.stderr)
    listed = jmp.exec(argv(CONTRACT[4]), cwd=ROOT)
    assert listed.code == 0 and [s["session_id"] for s in listed.of("sessions")[0]["sessions"]]


def test_check_task_and_the_research_run_as_written(harness: HarnessCli) -> None:
    checked = run_readable(harness, argv(CHECK_TASK))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    harness.jev.script([
        {"tool": "web.open_link"}, {"web.open_link.link": "marker"},
        {"tool": "record_evidence"}, {"tool": "save_report"},
    ])  # fmt: skip
    with SiteServer() as site:
        words = argv(RUN, {"https://docs.example.org": site.url, "<source marker>": MARKER})
        run = run_readable(harness, words)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((harness.cwd / "local-results" / "research.json").read_text())
    assert [r["label"] for r in report["records"]] == ["requirements"]
    assert MARKER in report["records"][0]["quote"]


def test_the_mcp_example_word_for_word(harness: HarnessCli) -> None:
    corpus = harness.cwd / "permitted-corpus"
    corpus.mkdir()
    (corpus / "impl.md").write_text(
        "Notes.\n\nThe relevant_identifier is implemented as <source marker> here.\n\nEnd.\n"
    )
    harness.jev.script([
        {"tool": "files.search"}, {"tool": "files.read"},
        {"tool": "record_evidence"}, {"tool": "save_report"},
    ])  # fmt: skip
    words = argv(MCP)
    env = harness.env() | {"JMP_SESSIONS_DIR": str(harness.home)}
    params = StdioServerParameters(command=words[0], args=words[1:], env=env, cwd=harness.cwd)
    seen: dict[str, Any] = {}

    async def main() -> None:
        with (harness.tmp / "mcp-stderr.txt").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                seen["run"] = (await session.call_tool("run_task", {})).structuredContent

    anyio.run(main)
    run = seen["run"]
    assert run["status"] == "completed", (run, (harness.tmp / "mcp-stderr.txt").read_text())
    results = harness.cwd / "local-results"
    report = json.loads((results / "workspace.json").read_text())
    assert [r["label"] for r in report["records"]] == ["implementation"]
    assert "<source marker>" in report["records"][0]["quote"]
    log = harness.home / run["session_id"] / "events.jsonl"
    assert (results / "session.jsonl").read_bytes() == log.read_bytes()
