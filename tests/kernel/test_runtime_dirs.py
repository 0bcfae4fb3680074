"""Runtime directories for the worker sockets: private, named after their kernel, and a dead
kernel's removed by the next one (issue 9, item 19)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from kernel.supervision import runtime


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(runtime, "RUNTIME_ROOT", str(tmp_path))
    return tmp_path


def test_a_runtime_dir_is_private_and_names_its_kernel(root: Path) -> None:
    made = runtime.make_runtime_dir()
    assert made.parent == root
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    pid, ticks = (int(x) for x in made.name.split("-")[1:3])
    assert (pid, ticks) == (os.getpid(), runtime.start_ticks(os.getpid()))
    assert runtime.make_runtime_dir() != made  # never the same one twice


def test_only_a_dead_kernels_dirs_are_removed(root: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is free now (and if reused, the start time tells it apart)
    dead = root / f"jmp-{gone.pid}-12345-abc"
    recycled = root / f"jmp-{os.getpid()}-1-abc"  # our pid, another start time: dead too
    alive = root / f"jmp-{os.getpid()}-{runtime.start_ticks(os.getpid())}-abc"
    other = root / "jmp-not-a-kernel"
    for path in (dead, recycled, alive, other):
        path.mkdir()
    (dead / "socket").write_text("")
    target = root / "target"
    target.mkdir()
    link = root / f"jmp-{gone.pid}-1-link"
    link.symlink_to(target)  # a link named like one is never followed nor removed
    for n in range(3000):  # /tmp holds thousands of other entries on a real machine
        (root / f"oh_editor_history_{n}").touch()
    removed = runtime.clean_stale_runtime_dirs(force=True)
    assert sorted(removed) == sorted([dead.name, recycled.name])
    assert not dead.exists() and not recycled.exists()
    assert alive.is_dir() and other.is_dir() and link.is_symlink() and target.is_dir()
