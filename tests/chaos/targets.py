"""Which processes a kill can hit, found as descendants of the jmp process by their argv.

`TARGETS` is the one table of kill targets: a new worker kind (the warm pool) is one line,
`"pool": _module("workers.pool")`. The kernel is the session lock's holder (the process that
writes the log), else the started process itself.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil

Matcher = Callable[[list[str]], bool]


def _module(name: str) -> Matcher:
    """argv runs `python -m <name>` (how the kernel spawns every worker kind)."""
    return lambda argv: any(a == "-m" and b == name for a, b in itertools.pairwise(argv))


def _script(name: str) -> Matcher:
    return lambda argv: any(arg.endswith(name) for arg in argv[:3])


WORKERS: dict[str, Matcher] = {
    "router": _module("workers.router"),
    "generator": _module("workers.generator"),
    "tool": _module("workers.tool"),
    "mcp": _script("mcp_server.py"),  # the fake MCP server, a child of the tool worker
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


def _of_iteration(proc: psutil.Process, marker: str) -> bool:
    try:
        if any(marker in arg for arg in proc.cmdline()):
            return True
        return proc.environ().get("JMP_SESSIONS_DIR", "").startswith(marker)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def find(target: str, root_pid: int, lock: Path | None, marker: str) -> int | None:
    """The pid to kill for `target`, or None when no such process is alive right now.

    Workers are looked for below the jmp process first, then (a worker forked by a warm pool
    is not a descendant) among all processes of this iteration (`marker` in argv or env)."""
    if target == "kernel":
        return kernel_pid(root_pid, lock) if psutil.pid_exists(root_pid) else None
    match = WORKERS[target]
    for proc in descendants(root_pid):
        if match(_argv(proc)):
            return proc.pid
    for proc in psutil.process_iter():
        if match(_argv(proc)) and _of_iteration(proc, marker):
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
        try:
            if self.seen.get(proc.pid) == proc.create_time():
                return True
            if any(self.marker in arg for arg in proc.cmdline()):
                return True
            if proc.cwd().startswith(self.marker):
                return True
            return bool(proc.environ().get("JMP_SESSIONS_DIR", "").startswith(self.marker))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False

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
