"""How a power cut lands in one invocation (the Invocation's side of it; power.py checks
what it left). Freeze the disk, kill every process of the run, take the disk's image: a
process blocked on the frozen disk dies only once the cut answers it, so the invocation waits
for the cut, never for the kill.

`fs` cuts are armed in the disk (it freezes itself at the planned operation, then the watcher
fires); `random` cuts are a timer; `event` cuts fire from the stdout reader; the kill phases
fire as kills do.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

from jmp_lab.chaos import targets
from jmp_lab.chaos.plan import DISK_FAULTS, KEPT_FILES, Cut, Fault, Kill
from jmp_lab.chaos.powercut.control import LossyDisk
from jmp_lab.chaos.world import World

PRINT_WAIT_S = 2.0  # an fs cut after a record's write waits this long for it to be printed


class CutLanding:
    """Mixed into Invocation, whose state it shares (see there)."""

    world: World
    fault: Fault | None
    queue: list[Kill | Cut]
    seen: list[int]
    census: targets.Census | None
    out: Any
    _proc: subprocess.Popen[str] | None
    _lock: threading.RLock
    _done: threading.Event
    _stream: Kill | Cut | None
    _stopped: bool
    _since: list[dict[str, Any]]
    _cutting: threading.Event
    _cut_done: threading.Event

    @property
    def kill(self) -> Kill | Cut | None:
        raise NotImplementedError

    def _fire(self, kill: Kill | Cut) -> None:
        raise NotImplementedError

    def _cut(self, cut: Cut) -> None:
        """The power cut: freeze the disk, kill every process of the run, take the disk's
        image. (A process blocked on the frozen disk dies only once the cut answers it.)"""
        proc, disk = self._proc, self.world.disk
        with self._lock:
            if proc is None or disk is None or self.kill is not cut:
                return
            self.queue.pop(0)
            self.seen[0], self._stream, self._stopped = 0, None, True
            self._cutting.set()
        try:
            self._power_off(cut, proc, disk)
        finally:
            self._cut_done.set()

    def _power_off(self, cut: Cut, proc: subprocess.Popen[str], disk: LossyDisk) -> None:
        if cut.phase == "fs" and cut.contains and cut.kind == "write":
            self._await_print(cut.contains)
        disk.freeze()
        if self.census is not None:
            self.census.sample(proc.pid)
        targets.kill_run(proc.pid, self.census)
        self.out.before = self.world.session_files()
        self.out.lost = disk.cut(cut.data, cut.dirs, cut.seed)
        self.out.cut = cut

    def _await_print(self, contains: str) -> None:
        """The record whose write froze the disk is printed next: wait for it (or a while)."""
        deadline = time.monotonic() + PRINT_WAIT_S
        while time.monotonic() < deadline and not self._done.is_set():
            with self._lock:
                if any(contains in json.dumps(r, separators=(",", ":")) for r in self._since):
                    return
            time.sleep(0.005)

    def _watch_disk(self) -> None:
        """fs cuts: the disk froze itself at the planned operation; random cuts: a timer."""
        disk = self.world.disk
        started = time.monotonic()
        while disk is not None and not self._done.is_set():
            armed = self.kill
            if isinstance(armed, Cut) and armed.phase == "random":
                if time.monotonic() - started >= armed.delay:
                    self._fire(armed)
                    return
                self._done.wait(0.02)
            elif isinstance(armed, Cut) and armed.phase == "fs":
                if disk.wait(0.2) is not None and self.kill is armed:
                    self._fire(armed)
                    return
            else:
                self._done.wait(0.05)

    def _rules(self) -> list[dict[str, Any]]:
        """What the disk is armed with for this invocation: the fault, the armed fs cut."""
        rules: list[dict[str, Any]] = []
        fault = self.fault
        if fault and fault.kind in DISK_FAULTS:
            op, action = ("fsync", "eio") if fault.kind == "eio_fsync" else ("write", "enospc")
            rules.append(
                {"op": op, "pattern": KEPT_FILES, "nth": int(fault.value), "action": action}
            )
        armed = self.kill
        if isinstance(armed, Cut) and armed.phase == "fs":
            rules.append(
                {
                    "op": armed.kind,
                    "pattern": armed.pattern,
                    "contains": armed.contains,
                    "nth": armed.nth,
                    "action": f"freeze-{armed.timing}",
                }
            )
        return rules
