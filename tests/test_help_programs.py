"""Every `--help` usage line names the program that was typed (issue 37): the console script
when that ran, `python -m MODULE` when that did; `jmp`, `python main.py` and `jev-harness` are
one CLI each and say so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("script", "module"),
    [("jmp-chaos", "jmp_lab.chaos"), ("jev-harness-mcp", "jev_harness.mcp"),
     ("jmp-demo", "jmp_lab.demo")],
)  # fmt: skip
def test_usage_names_the_program_that_ran(script: str, module: str, tmp_path: Path) -> None:
    for argv, name in (([str(BIN / script)], script), ([sys.executable, "-m", module], None)):
        done = subprocess.run(
            [*argv, "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        usage = (done.stdout + done.stderr).split("usage: ", 1)[1]
        assert usage.startswith(f"{name or 'python -m ' + module} "), usage[:80]


def test_jev_harness_mcp_names_itself_in_its_errors(tmp_path: Path) -> None:
    """Issue 37, item 8: what `jev-harness-mcp` says on stderr starts with the command typed
    (before: `jev_harness.mcp: not set: TYPESAFE_API_KEY ...`, a name nobody runs)."""
    script = ROOT / "examples" / "workspace_task.py"
    env = {k: v for k, v in os.environ.items() if k != "TYPESAFE_API_KEY"}
    done = subprocess.run(
        [str(BIN / "jev-harness-mcp"), str(script), "--goal", "g", "--inputs", "{}"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("jev-harness-mcp: not set: TYPESAFE_API_KEY"), done.stderr
