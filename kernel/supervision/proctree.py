"""Find and kill a worker's whole process tree, including shells that left its group.

Three nets, because each alone misses something: the worker's process group (what it spawned
directly), the descendants recorded while it was alive (pid + create_time, so a recycled pid is
never killed), and an environment token every descendant inherits (children born after the
last record, or reparented away from the worker).

psutil is imported on first use, in the wire thread, not when the kernel starts (it costs about
1x a bare interpreter start, and the first model request does not need it).
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING

from kernel.supervision.restart import TREE_WAIT_S
from protocol.spawn import TOKEN_ENV

if TYPE_CHECKING:
    import psutil


class TreeRecord:
    """Descendants of one process, remembered while it was alive."""

    def __init__(self, root_pid: int, token: str) -> None:
        self.root_pid = root_pid
        self.token = token
        self.seen: dict[int, float] = {}  # pid -> create_time

    def record(self) -> None:
        """Remember the root's current descendants; a gone root is not an error."""
        import psutil

        try:
            kids = psutil.Process(self.root_pid).children(recursive=True)
        except psutil.Error:
            return
        for kid in kids:
            with contextlib.suppress(psutil.Error):
                self.seen.setdefault(kid.pid, kid.create_time())

    def survivors(self) -> list[psutil.Process]:
        """Recorded descendants and token holders that are still running."""
        import psutil

        found: dict[int, psutil.Process] = {}
        for pid, created in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == created and _running(proc):
                    found[pid] = proc
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid == os.getpid():
                continue
            with contextlib.suppress(psutil.Error):
                if proc.environ().get(TOKEN_ENV) == self.token and _running(proc):
                    found[proc.pid] = proc
        return list(found.values())

    def kill_all(self) -> int:
        """SIGKILL the root's group and every survivor until none is left; returns the count."""
        import psutil

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
