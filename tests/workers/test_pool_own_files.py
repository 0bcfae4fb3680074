"""The warm pool's own files (pool.lock, pool.log, pool.pid) are never opened through a planted
name: a symbolic link, a hard link or a FIFO put there by a same-user process is refused, and
the file it points at stays as it was (issue 20, item 12)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host import confinement as C
from host import pool as H
from host.own_files import PlantedFile, open_own
from kernel.supervision import pool_client
from tests.support.warm import ROOT, ask_status, make_pool_dir

VICTIM = b"precious: a file of the user's, elsewhere\n"


def plant(directory: Path, name: str, how: str, victim: Path) -> None:
    if how == "symlink":
        victim.write_bytes(VICTIM)
        (directory / name).symlink_to(victim)
    elif how == "dangling":  # O_CREAT through it would create the target
        (directory / name).symlink_to(victim)
    elif how == "hardlink":
        victim.write_bytes(VICTIM)
        os.link(victim, directory / name)
    else:
        os.mkfifo(directory / name)


def serve(directory: Path) -> subprocess.Popen[bytes]:
    argv = H.serve_argv(sys.executable, directory, 600, "none")
    env = H.pool_env(os.environ) | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen(argv, env=env, cwd=str(ROOT), stderr=subprocess.PIPE)


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("pool.log", "symlink"),
        ("pool.log", "hardlink"),
        ("pool.log", "fifo"),
        ("pool.lock", "dangling"),
        ("pool.pid", "symlink"),
        ("pool.pid", "hardlink"),
    ],
)
def test_the_pool_refuses_a_planted_file_and_touches_nothing_through_it(
    name: str, how: str
) -> None:
    directory = make_pool_dir()
    home = H.view_dir(directory, C.own_view_key())  # where the pool of our view keeps them
    home.mkdir(mode=0o700)
    victim = directory.parent / f"{directory.name}-victim"
    try:
        plant(home, name, how, victim)
        # A reader on the FIFO: a pool that opens it for writing goes on instead of hanging.
        reader = os.open(home / name, os.O_RDONLY | os.O_NONBLOCK) if how == "fifo" else None
        proc = serve(directory)
        try:
            # Either it refuses (exits) or it serves; ask until one of the two is seen.
            while proc.poll() is None and ask_status(directory) is None:
                time.sleep(0.05)
            served = proc.poll() is None
        finally:
            proc.kill()
            _out, err = proc.communicate()
            if reader is not None:
                os.close(reader)
        assert not served, f"the pool served with a planted {name} ({how})"
        assert proc.returncode == 2
        assert name in err.decode() and "jmp-warm-pool" in err.decode()
        if how == "dangling":
            assert not victim.exists()  # nothing was created through the link
        elif how != "fifo":
            assert victim.read_bytes() == VICTIM
    finally:
        victim.unlink(missing_ok=True)
        for entry in home.iterdir():
            entry.unlink()
        home.rmdir()
        directory.rmdir()


def test_a_kernel_never_creates_a_file_through_a_planted_lock(tmp_path: Path) -> None:
    directory = make_pool_dir()
    victim = tmp_path / "created-through-the-link"
    try:
        (directory / "pool.lock").symlink_to(victim)
        assert pool_client._locked(directory)  # counted as held: no pool is launched into it
        assert not victim.exists()
    finally:
        (directory / "pool.lock").unlink()
        directory.rmdir()


def test_open_own_truncates_only_a_file_of_its_own(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.write_bytes(b"old")
    fd = open_own(mine, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert mine.read_bytes() == b""
    other = tmp_path / "other"
    other.write_bytes(VICTIM)
    os.link(other, tmp_path / "second-name")
    with pytest.raises(PlantedFile, match="hard link"):
        open_own(tmp_path / "second-name", os.O_WRONLY | os.O_TRUNC)
    assert other.read_bytes() == VICTIM
