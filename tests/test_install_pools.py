"""A second installation gets a warm pool of its own (issue 23): the default pool dir names
the installation (host/pool.py `install_tag`), so two copies of jmp (two checkouts, a uv
tool and a pipx one) no longer find each other's pool stale and replace it on every run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from host import pool as H
from tests.support.cli import ROOT

PROBE = "import os; from host import pool; print(pool.pool_dir(os.environ, os.getuid()))"


def test_the_default_pool_dir_is_per_installation(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert H.pool_dir({}, 7, a) != H.pool_dir({}, 7, b)
    assert H.pool_dir({}, 7, a) == Path(f"/tmp/jmp-warm-7-{H.install_tag(a)}")
    runtime = {"XDG_RUNTIME_DIR": "/run/user/7"}
    assert H.pool_dir(runtime, 7, a) == Path(f"/run/user/7/jmp-warm-{H.install_tag(a)}")
    assert H.pool_dir({"JMP_WARM_DIR": "/x/y", **runtime}, 7, a) == Path("/x/y")  # as given


def test_two_copies_of_the_code_name_two_pool_dirs(tmp_path: Path) -> None:
    """What each copy's kernel and pool compute, each from its own files (2b9f963: the same
    /tmp/jmp-warm-UID for both)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JMP_WARM_DIR", "PYTHONPATH")}
    dirs = []
    for name in ("one", "two"):
        for package in ("protocol", "host"):
            shutil.copytree(ROOT / package, tmp_path / name / package)
        probe = [sys.executable, "-s", "-c", PROBE]
        done = subprocess.run(
            probe, cwd=tmp_path / name, env=env, capture_output=True, text=True, check=True
        )
        dirs.append(done.stdout.strip())
    assert dirs[0] != dirs[1] and all(d.endswith(tuple("0123456789abcdef")) for d in dirs)
