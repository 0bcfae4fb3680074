"""Find and kill a worker's whole process tree, including shells that left its group.

Three nets, because each alone misses something: the worker's process group (what it spawned
directly), the descendants recorded while it was alive (pid + start time, so a recycled pid is
never killed), and an environment token every descendant inherits (children born after the
last record, or reparented away from the worker).

Recording reads /proc directly: it runs in the wire thread while every worker starts, and
psutil's import alone (about 1x a bare interpreter start, holding the GIL) delayed the first
model request. psutil is imported only to kill (survivors, kill_all), where its care pays.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from host.spawn import TOKEN_ENV
from kernel.supervision.restart import TREE_WAIT_S

if TYPE_CHECKING:
    import psutil


class TreeRecord:
    """Descendants of one process, remembered while it was alive."""

    def __init__(self, root_pid: int, token: str) -> None:
        self.root_pid = root_pid
        self.token = token
        self.root_start = _start_ticks(root_pid)  # tells a recycled root pid from the root
        self.seen: dict[int, int] = {}  # pid -> start time (clock ticks after boot)

    def record(self) -> None:
        """Remember the root's current descendants; a gone root is not an error."""
        parents = _parents()
        if self.root_pid not in parents:
            return
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in parents.items():
            children.setdefault(ppid, []).append(pid)
        stack = list(children.get(self.root_pid, ()))
        while stack:
            pid = stack.pop()
            if pid not in self.seen:  # a pid (with its start time) is remembered once
                self.seen[pid] = parents[pid][1]
            stack.extend(children.get(pid, ()))

    def survivors(self) -> list[psutil.Process]:
        """Recorded descendants and token holders that are still running, the root excepted:
        its owner reaps it (waiting on it here reaped a cold worker before its Popen could,
        which then read the status of a SIGKILLed worker as exit code 0)."""
        import psutil

        found: dict[int, psutil.Process] = {}
        for pid, created in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if _start_ticks(pid) == created and _running(proc):
                    found[pid] = proc
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid in (os.getpid(), self.root_pid):
                continue
            with contextlib.suppress(psutil.Error):
                if proc.environ().get(TOKEN_ENV) == self.token and _running(proc):
                    found[proc.pid] = proc
        return list(found.values())

    def kill_all(self, kill_root: Callable[[], None] | None = None) -> int:
        """SIGKILL the root, its group and every survivor until none is left; returns the
        count. The root is only signalled: its owner reaps it (so its pid stays pinned).

        `kill_root` signals the root when its pid is not pinned by us (a warm worker whose
        pool died is reaped by init: its pid may be reused, its pidfd cannot); the group is
        signalled by number unless that number now names another process (a number used as a
        process group id is never reused while the group has a member)."""
        import psutil

        with contextlib.suppress(OSError):
            if kill_root is not None:
                kill_root()
            else:
                os.kill(self.root_pid, signal.SIGKILL)  # our own unreaped child
        if _start_ticks(self.root_pid) in (None, self.root_start):
            with contextlib.suppress(OSError):
                os.killpg(self.root_pid, signal.SIGKILL)
        killed = 0
        for _ in range(5):  # a parent may fork between our scan and its death
            procs = self.survivors()
            if not procs:
                break
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
                    killed += 1
            psutil.wait_procs(procs, timeout=TREE_WAIT_S)
        return killed


def _running(proc: psutil.Process) -> bool:
    """A zombie has already exited; only its parent can reap it."""
    import psutil

    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from /proc/PID/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # the name may hold spaces and ')'
        return int(fields[1]), int(fields[19])  # fields 4 and 22 of proc(5)
    except (OSError, IndexError, ValueError):
        return None


def _start_ticks(pid: int) -> int | None:
    found = _stat(str(pid))
    return None if found is None else found[1]


def _parents() -> dict[int, tuple[int, int]]:
    """Every process: pid -> (parent pid, start time). One pass over /proc, no psutil."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (found := _stat(name)) is not None:
            table[int(name)] = found
    return table
