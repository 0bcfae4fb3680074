"""`make demo` keeps working: the scripted walk-through ends completed, nothing ran twice."""

from __future__ import annotations

import subprocess
import sys

from tests.support.cli import ROOT


def test_demo_walks_through_kill_block_ack_complete() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "jmp_lab.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "SCRIPTED" in out
    assert "tool_uncertain   bash cause=kernel_exit ack=False" in out
    assert "tool_uncertain   bash cause=kernel_exit ack=True" in out
    assert "log.txt has 1 line(s)" in out
