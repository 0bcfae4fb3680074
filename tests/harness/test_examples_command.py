"""`jev-harness examples` (issue 37): where the example task scripts are, and `--copy DIR` puts
them where the docs' and the seed's commands (`check-task examples/...`) expect them; a missing
example names the command. The installed copy (share/jmp/examples):
tests/test_build_from_checkout.py (a wheel of the checkout, installed offline) and
tests/test_install.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT

HARNESS = str(Path(sys.executable).parent / "jev-harness")


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HARNESS, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_examples_says_where_they_are_and_copies_them_out(tmp_path: Path) -> None:
    where = harness("examples", cwd=tmp_path)
    assert where.returncode == 0 and f"are in {ROOT / 'examples'}:" in where.stdout
    assert "workspace_task.py" in where.stdout and "--copy examples" in where.stdout
    missing = harness("check-task", "examples/research_task.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert "`jev-harness examples --copy examples` puts them there" in missing.stderr
    copied = harness("examples", "--copy", "examples", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    for name in ("research_task.py", "workspace_task.py"):
        assert (tmp_path / "examples" / name).read_bytes() == (
            ROOT / "examples" / name
        ).read_bytes()
    sound = harness("check-task", "examples/research_task.py", cwd=tmp_path)  # the seed's line
    assert sound.returncode == 0 and "check-task: sound" in sound.stdout, sound.stderr
    (tmp_path / "examples" / "workspace_task.py").write_text("# mine now\n")
    kept = harness("examples", "--copy", "examples", cwd=tmp_path)
    assert kept.returncode == 2 and "not overwritten" in kept.stderr
    assert (tmp_path / "examples" / "workspace_task.py").read_text() == "# mine now\n"
