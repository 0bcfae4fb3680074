"""Which processes a kill can hit, found as descendants of the jmp process by their argv.

`WORKERS` is the one table of kill targets besides the kernel: a new worker kind is one line.
Workers forked by the warm pool are not descendants of the kernel: they are found by their argv
and the iteration's directory in their argv, cwd or environment. The kernel is the session
lock's holder (the process that writes the log), else the started process itself.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from host.spawn import SPAWN_CWD, child_pythonpath, module_argv

Matcher = Callable[[list[str]], bool]


def _module(name: str) -> Matcher:
    """argv runs `python -m <name>` (how the kernel spawns every worker kind)."""
    return lambda argv: any(a == "-m" and b == name for a, b in itertools.pairwise(argv))


def _script(name: str) -> Matcher:
    return lambda argv: any(arg.endswith(name) for arg in argv[:3])


def _title(name: str) -> Matcher:
    return lambda argv: bool(argv) and argv[0] == name


POOL_TITLE = "jmp-warm-pool"  # the warm pool's process title: `jmp-warm-pool DIR`
_DISK = _module("jmp_lab.chaos.powercut")  # a power iteration's disk daemon


WORKERS: dict[str, Matcher] = {
    "router": _module("workers.router"),
    "generator": _module("workers.generator"),
    "tool": _module("workers.tool"),
    "mcp": _script("mcp_server.py"),  # the fake MCP server, a child of the tool worker
    "pool": _title(POOL_TITLE),  # the campaign's warm pool (kernels fall back to a cold spawn)
}
TARGETS: tuple[str, ...] = ("kernel", *WORKERS)


def _argv(proc: psutil.Process) -> list[str]:
    try:
        return list(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def descendants(root_pid: int) -> list[psutil.Process]:
    """The live process tree under `root_pid` (empty when it is gone)."""
    try:
        return list(psutil.Process(root_pid).children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def kernel_pid(root_pid: int, lock: Path | None) -> int:
    """The log writer: the lock's holder when it is the started process or below it."""
    try:
        holder = int(lock.read_text().split()[0]) if lock else 0
    except (OSError, ValueError, IndexError):
        holder = 0
    if holder == root_pid or holder in {p.pid for p in descendants(root_pid)}:
        return holder
    return root_pid


def _marked(proc: psutil.Process, marker: str) -> bool:
    """`marker` (a directory) is in the process's argv, cwd or JMP_SESSIONS_DIR."""
    try:
        if any(marker in arg for arg in proc.cmdline()):
            return True
        if proc.cwd().startswith(marker):
            return True
        return proc.environ().get("JMP_SESSIONS_DIR", "").startswith(marker)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def find(target: str, root_pid: int, lock: Path | None, markers: tuple[str, ...]) -> int | None:
    """The pid to kill for `target`, or None when no such process is alive right now.

    Workers are looked for below the jmp process first, then (a worker forked by a warm pool
    is not a descendant) among all processes marked with the iteration's (or the campaign's
    pool's) directory."""
    if target == "kernel":
        return kernel_pid(root_pid, lock) if psutil.pid_exists(root_pid) else None
    match = WORKERS[target]
    for proc in descendants(root_pid):
        if match(_argv(proc)):
            return proc.pid
    for proc in psutil.process_iter():
        if match(_argv(proc)) and any(_marked(proc, m) for m in markers):
            return proc.pid
    return None


def sigkill(pid: int) -> bool:
    """SIGKILL one process by pid; False when it was already gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


class Census:
    """Every process seen in one iteration's trees, by (pid, create time), to find survivors."""

    def __init__(self, marker: str) -> None:
        self.marker = marker  # the iteration's directory: in argv, cwd or environment
        self.seen: dict[int, float] = {}

    def sample(self, root_pid: int) -> None:
        for proc in [*descendants(root_pid)]:
            with contextlib.suppress(psutil.Error):
                self.seen.setdefault(proc.pid, proc.create_time())

    def _ours(self, proc: psutil.Process) -> bool:
        """Of this iteration; never the campaign's warm pool (it serves every iteration) nor
        the iteration's lossy disk (it stands for the hardware)."""
        argv = _argv(proc)
        if argv and (argv[0] == POOL_TITLE or _DISK(argv)):
            return False
        try:
            if self.seen.get(proc.pid) == proc.create_time():
                return True
        except psutil.Error:
            return False
        return _marked(proc, self.marker)

    def alive(self) -> list[psutil.Process]:
        me = os.getpid()
        found = []
        for proc in psutil.process_iter():
            if proc.pid != me and self._ours(proc):
                with contextlib.suppress(psutil.Error):
                    if proc.status() != psutil.STATUS_ZOMBIE:
                        found.append(proc)
        return found

    def survivors(self, grace: float) -> list[psutil.Process]:
        """What is still alive after `grace` seconds (workers exit on their own)."""
        deadline = time.monotonic() + grace
        left = self.alive()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.alive()
        return left


def kill_run(root_pid: int, census: Census | None) -> int:
    """SIGKILL every process of the run at once (a power cut): the started process, its tree,
    and everything the census counts as the iteration's (workers the pool forked, their MCP
    servers); never the campaign's pool. Returns how many were alive."""
    victims = [root_pid, *(p.pid for p in descendants(root_pid))]
    if census is not None:
        victims += [p.pid for p in census.alive()]
    return sum(sigkill(pid) for pid in dict.fromkeys(victims))


def start_pool(directory: Path) -> None:
    """Start the campaign's warm pool (or find it starting) and wait for its preload
    (`workers.pool start`): before a campaign's first iteration, and after a kill of it, so
    the runs that follow are as warm as their plan says rather than cold while it imports.
    Only for this checkout's jmp: another jmp would find this pool's code stale anyway."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = dict(os.environ, JMP_WARM_DIR=str(directory))
    env["PYTHONPATH"] = child_pythonpath(os.environ)
    subprocess.run(
        module_argv(sys.executable, "workers.pool", ["start", str(directory)]),
        env=env,
        cwd=SPAWN_CWD,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def stop_pool(directory: Path) -> None:
    """End the campaign's warm pool (SIGTERM, then SIGKILL) by its pid."""
    for proc in psutil.process_iter():
        argv = _argv(proc)
        if argv[:2] == [POOL_TITLE, str(directory)]:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
                proc.wait(5)
            sigkill(proc.pid)
