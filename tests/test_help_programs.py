"""Every `--help` usage line names the program that was typed (issue 37): the console script
when that ran, `python -m MODULE` when that did; `jmp`, `python main.py` and `jev-harness` are
one CLI each and say so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


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
