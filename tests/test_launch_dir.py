"""No file of the launch directory is ever imported by jmp's own processes (issue 20 item 2).

Each entry point starts in a directory planted with a witness module for every top-level name
an import could look up (tests/support/launch_dir.py: the standard library, every installed
distribution, `zmq.py`, `queue.py`, `argparse.py`, `msgspec.py`, `workers/`, `protocol/`,
`kernel/`, ...): the run must work and leave no witness. The matrix row
(tests/security/test_launch_dir.py) does so for every front end on both spawn paths; here are
the entry points it does not drive: check-task's probe, the `python -m` spellings of the MCP
server, `python -m workers.pool start` and a run its pool serves, and the dev tools. The one
thing no code of ours can protect is pinned too: `python -m PACKAGE` imports a `PACKAGE` of
the launch directory before anything of ours runs (`python -P -m`, or a console script, does
not).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import ROOT, Cli, Run
from tests.support.launch_dir import OURS, plant, traces
from tests.support.warm import make_pool_dir, pool_pids, suite_pool

pytestmark = pytest.mark.timeout(300)

BIN = Path(sys.executable).parent  # the venv's console scripts: jmp, jev-harness, ...
PICK = ROOT / "tests" / "harness" / "scripts" / "pick_task.py"
PICK_INPUTS = {"items": ["a", "b", "c"], "target": "b"}


class Hostile:
    """A planted launch dir (also the workspace), its witness dir, loopback models and the
    environment of a warm run."""

    def __init__(self, tmp: Path, jev: JevServer, flash: FlashServer) -> None:
        self.tmp = tmp
        self.dir = tmp / "launch"
        self.witness = tmp / "witness"
        self.cli = Cli(tmp, jev, flash)
        self.jev, self.flash = jev, flash

    def plant(self, skip: tuple[str, ...] = ()) -> None:
        plant(self.dir, self.witness, skip)

    def env(self, **extra: str) -> dict[str, str]:
        env = self.cli.env()
        env.pop("PYTHONPATH", None)  # as a user runs it: the console scripts find our code
        return env | extra

    def run(self, argv: list[str], timeout: float = 180, **extra: str) -> Run:
        done = subprocess.run(
            argv,
            cwd=self.dir,
            env=self.env(**extra),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    def assert_clean(self, *outputs: str) -> None:
        assert traces(self.witness, *outputs) == []
        # served by the pool, not by a cold fallback
        assert not any("warm pool:" in text for text in outputs), outputs


@pytest.fixture
def hostile(short_tmp: Path, warm_pool_of_this_session: Path) -> Iterator[Hostile]:
    suite_pool(warm_pool_of_this_session)
    with JevServer() as jev, FlashServer() as flash:
        yield Hostile(short_tmp, jev, flash)


def test_check_task_imports_nothing_from_the_launch_dir(short_tmp: Path) -> None:
    """The probe (no worker: one path) starts from / with -P and enters the caller's cwd."""
    launch, witness = short_tmp / "launch", short_tmp / "witness"
    plant(launch, witness)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = [str(BIN / "jev-harness"), "check-task", str(PICK), "--inputs"]
    argv = [*check, json.dumps(PICK_INPUTS), "--json"]
    out = subprocess.run(argv, cwd=launch, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["ok"] is True, out.stdout + out.stderr
    assert traces(witness, out.stdout, out.stderr) == []


# The matrix (tests/security) drives the console script on both paths; these spellings differ
# in the server process only. A `python -m PACKAGE` in the launch dir imports that dir's
# PACKAGE before any code of ours can run (unprotectable, pinned below): not planted here.
MCP_SPELLINGS = {
    "python -m jev_harness.mcp": ("jev_harness.mcp", "jev_harness"),
    "python -m apixly_jev_harness.mcp": ("apixly_jev_harness.mcp", "apixly_jev_harness"),
}


@pytest.mark.parametrize("spelling", MCP_SPELLINGS)
def test_the_mcp_server_imports_nothing_from_the_launch_dir(
    hostile: Hostile, spelling: str
) -> None:
    module, skip = MCP_SPELLINGS[spelling]
    command = [sys.executable, "-m", module]
    hostile.plant((skip,))
    hostile.jev.script([{"items.pick.item": "b"}])
    args = [*command[1:], str(PICK), "--goal", "pick b", "--inputs", json.dumps(PICK_INPUTS)]
    args += ["--sessions-dir", str(hostile.tmp / "sessions")]
    params = StdioServerParameters(
        command=command[0], args=args, env=hostile.env(), cwd=str(hostile.dir)
    )
    errlog_path = hostile.tmp / "mcp.stderr"
    seen: dict[str, Any] = {}

    async def main() -> None:
        with errlog_path.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                seen["observe"] = (await session.call_tool("observe", {})).structuredContent
                seen["run"] = (await session.call_tool("run_task", {})).structuredContent

    anyio.run(main)
    assert seen["run"] and seen["run"]["status"] == "completed", (seen, errlog_path.read_text())
    hostile.assert_clean(errlog_path.read_text())


def test_python_m_imports_the_launch_dirs_package_of_that_name_and_dash_p_does_not(
    short_tmp: Path,
) -> None:
    """What no code of ours can protect, pinned: the interpreter resolves the -m target's top
    package before anything of ours runs. `-P` (and every console script) is immune."""
    launch, witness = short_tmp / "launch", short_tmp / "witness"
    plant(launch, witness)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for flags in ([], ["-P"]):
        argv = [sys.executable, *flags, "-m", "jev_harness.mcp", "--help"]
        subprocess.run(argv, cwd=launch, env=env, capture_output=True, timeout=60, check=False)
        found = sorted(p.name for p in witness.iterdir())
        # the planted package runs first, and anything after it is the planter's to decide
        assert ("jev_harness.witness" in found) if not flags else found == [], found
        for path in witness.iterdir():
            path.unlink()


def test_the_pool_started_from_the_launch_dir_imports_nothing_from_it(short_tmp: Path) -> None:
    """`python -m workers.pool start` typed in a directory (everything planted but `workers/`
    itself: see above), then a run it serves: neither the pool nor its forks import from there."""
    with JevServer() as jev, FlashServer() as flash:
        hostile = Hostile(short_tmp, jev, flash)
        hostile.plant(skip=("workers",))
        directory = make_pool_dir("ld")
        pool = [sys.executable, "-m", "workers.pool"]
        try:
            started = hostile.run([*pool, "start", str(directory), "--preload", "none"])
            assert started.code == 0, started.stderr
            jev.script([{"route": "done"}, {"completion_review": "complete"}])
            flash.queue([{"text": "Done."}])
            out = hostile.run([str(BIN / "jmp"), "--json", "hi"], JMP_WARM_DIR=str(directory))
            assert out.code == 0, out.stderr[-3000:]
            hostile.assert_clean(started.stdout, started.stderr, out.stdout, out.stderr)
        finally:
            for pid in pool_pids(directory):
                os.kill(pid, signal.SIGKILL)
            shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("module", ["jmp_lab.chaos", "bench.coldstart", "workers.pool"])
def test_the_dev_tools_import_nothing_from_the_launch_dir(short_tmp: Path, module: str) -> None:
    """`python -m jmp_lab.chaos --help` and the like (the demo runs from a planted directory in
    tests/jmp_lab/test_demo.py): their package's guard takes the launch dir off sys.path. `bench` is
    no installed package, it runs from a checkout: PYTHONPATH names it."""
    launch, witness = short_tmp / "launch", short_tmp / "witness"
    plant(launch, witness, skip=(module.partition(".")[0],))
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", module, "--help"]
    done = subprocess.run(argv, cwd=launch, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr
    assert traces(witness, done.stdout, done.stderr) == []


def test_every_package_run_with_python_m_opens_with_the_same_guard() -> None:
    """The guard cannot be imported from one home (an import is what it prevents): each copy
    is the first statement of its package and all are identical."""
    runnable = {
        p.relative_to(ROOT).parts[0]
        for p in ROOT.rglob("*.py")
        if ".venv" not in p.parts and p.relative_to(ROOT).parts[0] in OURS
        if p.name == "__main__.py" or 'if __name__ == "__main__":' in p.read_text()
    }
    assert runnable >= {"workers", "jev_harness", "apixly_jev_harness", "bench", "jmp_lab"}
    blocks = set()
    for package in sorted(runnable):
        text = (ROOT / package / "__init__.py").read_text()
        body = re.sub(r'^""".*?"""\n+', "", text, flags=re.S)
        assert body.startswith("import sys as _sys\n"), package
        blocks.add(body.split("\n\n\n")[0].split("    del _argv, _pairs, _target\n")[0])
    assert len(blocks) == 1, blocks
