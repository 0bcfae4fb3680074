"""`make demo` (jmp-demo) shows jmp's readable view with commands a person can copy: the
scripted walk-through ends completed, nothing ran twice, and every `$ jmp ...` line it printed
is a command line jmp accepts; the ones that need no model run as printed, afterwards.

It is started from a planted launch directory (tests/support/launch_dir.py: everything but
`jmp_lab/` itself, which `python -m jmp_lab.demo` resolves before any code of ours runs):
neither the demo nor the jmp runs it drives import anything from there."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import _parser
from tests.support.cli import ROOT
from tests.support.launch_dir import plant, traces


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_demo_shows_the_readable_view_with_copyable_commands(tmp_path: Path) -> None:
    launch = plant(tmp_path / "launch", tmp_path / "witness", skip=("jmp_lab",))
    proc = subprocess.run(
        [sys.executable, "-m", "jmp_lab.demo", "--dir", str(tmp_path / "demo")],
        cwd=launch,
        capture_output=True,
        text=True,
        timeout=360,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "SCRIPTED" in out
    assert "    +def greet(name):" in out and "    +    return 'Hello, ' + name" in out
    assert "outcome unknown (kernel_exit, not acknowledged)" in out
    assert "outcome unknown (kernel_exit, acknowledged)" in out
    assert "log.txt has 1 line(s)" in out
    assert "model_started" not in out and '"kind"' not in out  # the view, not --json events
    assert traces(tmp_path / "witness", proc.stdout, proc.stderr) == []
    typed = [
        shlex.split(line[2:].split("    #")[0]) for line in out.splitlines() if line[:6] == "$ jmp "
    ]
    assert len(typed) >= 6
    for words in typed:
        _parser().parse_args(words[1:])  # a usage error raises
    # --list and the replay of a completed session need no model: they work as printed, now.
    for words in (w for w in typed if "--list" in w or w == typed[-1]):
        again = subprocess.run(
            [sys.executable, str(ROOT / "main.py"), *words[1:]],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert ("sessions are kept in" if "--list" in words else "log.txt shows") in again.stdout
