"""What killed test runs leave: the no-orphan checks, and private warm-pool dirs.

The no-orphan checks of the crash tests see a forked worker, whose /proc environ is its pool's:
a kernel (a small script driving kernel.supervision) forks a fake worker through a private pool;
while it runs, both checks (`left_running`, `of_this_test`) must report it, whether they find it
by the cwd it took from its kernel or by the pidfd of its kernel it holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from host import pool as H
from tests.acp.helpers import left_running
from tests.support.cli import Cli
from tests.support.warm import (
    ROOT,
    PoolProc,
    ask_status,
    clean_pool_dirs,
    gone,
    make_pool_dir,
    pool_pids,
    private_pool,
    stop_pools_started,
)
from tests.test_e2e_crash import of_this_test

KERNEL = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kernel.supervision.supervisor import Worker

    worker = Worker("tool", Path(sys.argv[1]), env={"JMP_FAKE_MODE": "ok"},
                    module="tests.fakes.worker")
    worker.start()
    worker.wait_ready(60)
    print(worker.pid, flush=True)
    sys.stdin.read()  # until the test closes our stdin
    worker.close()
    """
)


@pytest.mark.parametrize("cwd", ["workspace", "/"])
def test_a_forked_worker_left_running_is_reported(jmp: Cli, cwd: str) -> None:
    with private_pool() as pool:
        env = jmp.env(PYTHONPATH=str(ROOT))
        kernel = subprocess.Popen(
            [sys.executable, "-c", KERNEL, str(jmp.tmp / "rt")],
            cwd=jmp.workspace if cwd == "workspace" else cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert kernel.stdin is not None and kernel.stdout is not None
        try:
            worker = int(kernel.stdout.readline())
            assert psutil.Process(worker).ppid() == pool.pid  # forked, not spawned by the kernel
            assert "JMP_SESSIONS_DIR" not in psutil.Process(worker).environ()  # the pool's
            assert worker in {p.pid for p in left_running(jmp, timeout=0)}
            assert worker in {p.pid for p in of_this_test(jmp)}
        finally:
            kernel.stdin.close()
            assert kernel.wait(60) == 0
            kernel.stdout.close()
        assert not left_running(jmp) and not of_this_test(jmp)  # and nothing else is counted
        assert os.getpid() not in {p.pid for p in left_running(jmp, timeout=0)}


CREATOR = (
    "from tests.support.warm import make_pool_dir; print(make_pool_dir('p'), flush=True); input()"
)


def test_a_killed_runs_pool_dir_is_removed_at_the_next_start_unless_a_pool_serves_it() -> None:
    """A test run killed with its pool dir left: the next `make_pool_dir` removes it, but not
    while a pool still serves it, and never a live creator's dir or a link."""
    creator = subprocess.Popen(
        [sys.executable, "-c", CREATOR], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert creator.stdout is not None and creator.stdin is not None
    left = Path(creator.stdout.readline().decode().strip())
    creator.kill()
    creator.wait()
    creator.stdin.close()
    creator.stdout.close()
    assert left.is_dir() and str(creator.pid) in left.name
    made = [make_pool_dir()]  # this process is alive: its dir stays
    link = left.with_name(left.name + "x")
    link.symlink_to(made[0])  # named like a dead run's dir, but a link: never followed or removed
    try:
        pool = PoolProc(left, preload="none")  # a pool launched there outlives the killed run
        try:
            assert left.name not in clean_pool_dirs() and pool.sock.exists()
        finally:
            pool.kill()
        made.append(make_pool_dir())  # the next start
        assert not left.exists()
        assert all(m.is_dir() for m in made) and link.is_symlink()
    finally:
        link.unlink()
        for path in (*made, left):
            shutil.rmtree(path, ignore_errors=True)


def test_a_pool_a_kernel_launched_into_a_private_dir_is_stopped_at_the_end(
    warm_pool_of_this_session: Path,
) -> None:
    """A kernel under test may launch a detached pool into a test's private dir (to replace a
    stale one); the session's `stop_pools_started` kills it with the others. The suite's own
    pool (also in a dir made here) is spared: the tests after this one use it."""
    directory = make_pool_dir()
    suite = pool_pids(warm_pool_of_this_session)
    try:
        with stop_pools_started(directory / "other", spare=warm_pool_of_this_session):
            argv = [*H.serve_argv(sys.executable, directory, 600, "none"), "--detach"]
            subprocess.run(argv, env=H.pool_env(os.environ), cwd="/", check=True)
            state = ask_status(directory)
            deadline = time.monotonic() + 60  # a liveness bound: the pool answers once imported
            while state is None and time.monotonic() < deadline:
                time.sleep(0.1)
                state = ask_status(directory)
            assert state is not None and pool_pids(directory) == [state.pid]
        assert gone([state.pid]) and pool_pids(directory) == []
        assert pool_pids(warm_pool_of_this_session) == suite
    finally:
        shutil.rmtree(directory, ignore_errors=True)
