"""What the Landlock probes cost a warm spawn (issue 32 item 1): `python -m bench pool_probe`.

A private pool (`--preload none`, the tests' fake worker allowed), then N rounds: a whole
warm spawn through `pool_client.spawn` (connect, the listener checks with the kernel's look at
the pool's probe, the kernel's own probe started, the Spawn, the pool's checks, the fork and
`Spawned`; the worker is then killed and released), and alone, the probe parts of it: the
kernel's `Probe()` and its close (a posix_spawn of `cat`, kill, reap), the kernel's open of
the pool probe's cwd, and the pool's reads of the kernel probe (exe, root).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from host import confinement as C
from host import landlock as L
from kernel.supervision import pool_client
from tests.support.warm import PoolProc, make_pool_dir

N = 60


def _times(step: Callable[[], object], n: int = N) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _row(name: str, times: list[float]) -> str:
    p90 = sorted(times)[int(0.9 * len(times))]
    return f"| {name} | {statistics.median(times):.3f} | {p90:.3f} |"


def run() -> str:
    directory = make_pool_dir("b")
    pool = PoolProc(directory)
    saved = {k: os.environ.get(k) for k in ("JMP_WARM", "JMP_WARM_DIR")}
    os.environ |= {"JMP_WARM": "1", "JMP_WARM_DIR": str(directory)}
    null = os.open(os.devnull, os.O_WRONLY)
    argv = [sys.executable, "-P", "-m", "tests.fakes.worker", "ipc:///nowhere"]
    try:
        title = [c for c in Path(f"/proc/{pool.pid}/cmdline").read_bytes().decode().split("\0")]
        pool_probe = L.probe_of_title(title)
        assert pool_probe is not None

        def spawn() -> None:
            proc = pool_client.spawn(argv, {"JMP_FAKE_MODE": "ok"}, null, null)
            assert proc is not None, "the pool did not fork"
            proc.kill_root()
            proc.wait()

        def own_probe() -> None:
            L.Probe().close()

        def kernel_look() -> None:
            _problem, fd = L.open_cwd(pool_probe, pool.pid)
            assert fd is not None
            os.close(fd)

        mine = L.Probe()

        def pool_look() -> None:
            assert not L.inspect(mine.pid, os.getpid())
            C.root_of(mine.pid)

        try:
            rows = {
                "warm spawn, whole (request to Spawned, kill, release)": _times(spawn),
                "kernel: start and close its probe": _times(own_probe),
                "kernel: open the pool probe's cwd": _times(kernel_look),
                "pool: read the kernel probe's exe and root": _times(pool_look),
            }
        finally:
            mine.close()
    finally:
        os.close(null)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        pool.kill()
        shutil.rmtree(directory, ignore_errors=True)
    load = os.getloadavg()[0]
    lines = [f"{N} rounds each, load average {load:.1f}", "", "| step | median ms | p90 ms |"]
    lines += ["|---|---|---|", *(_row(name, times) for name, times in rows.items())]
    return "\n".join(lines)
