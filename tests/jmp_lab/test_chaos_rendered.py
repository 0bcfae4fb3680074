"""The chaos runner's rendered-fetch kills (jmp_lab/chaos/rendered.py): the harness worker
SIGKILLed while Chromium renders the entry page (nothing captured yet) and a link (the entry
page captured before), on a warm worker and a cold one; every invariant holds; the chaos
runner's own entry (`jmp-chaos rendered`) runs them and prints its table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jmp_lab.chaos.rendered import iterate
from tests.support.browser import needs_chromium


@needs_chromium
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_kill_while_the_entry_page_renders_breaks_no_invariant(
    short_tmp: Path, warm: bool
) -> None:
    it = iterate(warm, "entry", 0.3, short_tmp)
    assert it.violations == [], it.line()


@needs_chromium
@pytest.mark.timeout(600)
def test_jmp_chaos_rendered_kills_warm_and_cold_and_prints_the_table(short_tmp: Path) -> None:
    """The chaos runner's own entry (`jmp-chaos rendered`, what `make chaos-rendered` runs):
    iterations 2 and 3 kill the worker during a held link, warm then cold; exit 0 and the
    runner's table."""
    script = Path(sys.executable).parent / "jmp-chaos"
    entry = [str(script)] if script.exists() else [sys.executable, "-m", "jmp_lab.chaos"]
    run = subprocess.run(
        [*entry, "rendered", "--iterations", "2", "--seed", "3", "--first", "2"],
        cwd=short_tmp,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "warm kill during link" in run.stderr and "cold kill during link" in run.stderr
    rows = dict(re.findall(r"^(\S.*?)\s{2,}(\S.*)$", run.stdout, re.M))
    assert rows["iterations"] == "2" and rows["kills"] == "2", run.stdout
    assert rows["kills: warm"] == "1" and rows["kills: cold"] == "1", run.stdout
    assert rows["kills: during link"] == "2" and rows["violations"] == "0", run.stdout
    assert "VIOLATION" not in run.stdout


def test_jmp_chaos_rendered_without_a_browser_exits_2_naming_it(short_tmp: Path) -> None:
    env = {**os.environ, "JEV_CHROMIUM": str(short_tmp / "no-such-chromium")}
    run = subprocess.run(
        [sys.executable, "-m", "jmp_lab.chaos", "rendered", "--iterations", "1"],
        cwd=short_tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "rendered: no browser: JEV_CHROMIUM=" in run.stderr and "no-such-chromium" in run.stderr
