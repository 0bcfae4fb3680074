"""A worker watches its kernel, not the clock (issue 21, workers under load).

A dead kernel is seen by its pidfd on both spawn paths (the warm pool passes the one it pinned
at connect, a cold spawn its own), however early the kernel dies; silence alone is taken for a
gone kernel only after KERNEL_SILENCE_S (a wedged kernel), since a live kernel starved past
the old 6 s lost its workers at load 16-57. Each stand-in kernel here gives its worker a
silence window of 600 s, so only the watch can be what ends it, on either path, killed while
its worker starts or once it is ready (the cold, starting case is also
tests/kernel/test_supervisor.py's, from the fix that handed cold workers the pidfd). The fake
worker (tests/fakes/worker.py) stands in for a worker kind; the warm path uses the suite's
pool.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from kernel.config.settings import ConfigError, Settings, tool_ready_s
from kernel.supervision.restart import TOOL_READY_S
from kernel.supervision.tools import Tools
from tests.support.warm import ROOT, PoolProc, gone

# The stand-in kernel: spawns one worker through the kernel's own spawn paths, prints its pid
# and its parent's, then waits to be killed (at once, or once the worker is Ready).
KERNEL = textwrap.dedent(
    """
    import os, sys
    import psutil
    from kernel.supervision.supervisor import Worker
    env = {"JMP_FAKE_MODE": "ok", "JMP_KERNEL_SILENCE_S": "600"}
    w = Worker("tool", sys.argv[1], env=env, module="tests.fakes.worker")
    w.start()  # returns once the process exists
    if sys.argv[2] == "ready":
        w.wait_ready(120)
    print(w.pid, psutil.Process(w.pid).ppid(), flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.parametrize("when", ["starting", "ready"])
@pytest.mark.parametrize("path", ["warm", "cold"])
def test_a_killed_kernels_worker_exits_by_its_watch_not_by_silence(
    short_tmp: Path, path: str, when: str
) -> None:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    pool = private = None
    if path == "warm":  # a pool of its own that forks the fake worker (the suite's one may
        private = PoolProc(short_tmp / "pool")  # have been relaunched by a jmp run without it)
        env["JMP_WARM_DIR"] = str(private.dir)
        pool = private.pid
    else:
        env["JMP_WARM"] = "0"
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(short_tmp / "rt"), when],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
        env=env,
    )
    assert kernel.stdout is not None and kernel.stdin is not None
    try:
        worker, parent = map(int, kernel.stdout.readline().split())
    finally:
        kernel.kill()  # kill -9 at once: a starting worker has not armed PDEATHSIG yet
        kernel.wait()
        kernel.stdout.close()
        kernel.stdin.close()
    try:
        assert parent == (pool if path == "warm" else kernel.pid), "not the path under test"
        if not gone([worker], 60):
            psutil.Process(worker).kill()
            pytest.fail(f"the {path} worker outlived its kernel (killed while {when})")
    finally:
        if private is not None:
            private.kill()


def test_the_tool_workers_ready_bound_is_jmp_tool_ready_s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert TOOL_READY_S == 300.0  # a cold OpenHands import took more than 120 s at load 16-57
    assert tool_ready_s({}) == TOOL_READY_S
    assert tool_ready_s({"JMP_TOOL_READY_S": "900"}) == 900.0
    for bad in ("soon", "0", "-5", "inf", "nan"):
        with pytest.raises(ConfigError, match="JMP_TOOL_READY_S"):
            Settings.environment({"JMP_TOOL_READY_S": bad})
    monkeypatch.setenv("JMP_TOOL_READY_S", "450")
    tools = Tools(tmp_path, tmp_path / "s" / "terminal")
    assert tools._slot.ready_s == 450.0
