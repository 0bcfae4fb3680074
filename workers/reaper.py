"""Killing processes a worker owns: the one mechanism behind its three jobs (the whole tree at
exit, `kill_tree` here, which `workers/base.py` runs; an MCP server's group,
`workers/mcp/launch.py`; the terminal's foreground job, `workers/tool/shell.py`). Always SIGKILL:
by then the process must stop now, and a polite signal has had its chance (a Ctrl+C, a closed
stdin) where one exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

import psutil


def kill(
    procs: Iterable[psutil.Process], *, groups: bool = False, wait_s: float = 0.0
) -> list[psutil.Process]:
    """SIGKILL each process still running (with `groups`, the whole process group of one that
    leads a group other than ours), then wait up to `wait_s` for them; returns those still
    alive. A psutil handle remembers its process's create time, so a pid the system reused
    since (another jmp kernel's, say) is never signalled."""
    signalled: list[psutil.Process] = []
    for proc in {p.pid: p for p in procs}.values():
        with contextlib.suppress(psutil.Error, OSError):
            if not proc.is_running():
                continue
            if groups and os.getpgid(proc.pid) == proc.pid != os.getpgrp():
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            signalled.append(proc)
    if wait_s <= 0 or not signalled:
        return signalled
    alive: list[psutil.Process] = psutil.wait_procs(signalled, timeout=wait_s)[1]
    return alive


def kill_tree() -> None:
    """SIGKILL every descendant of this process (orphans included: a worker is a subreaper)
    and reap them; what the worker does on its way out."""
    for _ in range(3):  # a dying parent may fork once more; look again
        kids = psutil.Process().children(recursive=True)
        if not kids:
            return
        kill(kids, wait_s=1.0)
