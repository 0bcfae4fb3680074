"""Helpers for worker tests: process searches with deadlines, closing within a time limit."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from kernel.supervision.supervisor import Worker
from tests.support.warm import gone, workers_of


def live_with(marker: str) -> list[psutil.Process]:
    """Running (non-zombie) processes whose command line contains `marker`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in " ".join(proc.info["cmdline"] or ()) and (
                proc.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(proc)
    return found


def pid_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until truthy; fail the test naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def close_within(worker: Any, timeout_s: float = 10.0) -> None:
    """close() must finish (zmq context terminated) in time, or the test fails."""
    done = threading.Event()

    def run() -> None:
        worker.close()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout_s), "close() hung: the zmq context did not terminate"


def fake_worker(runtime_dir: Any, mode: str = "ok") -> Worker:
    """A started fake worker (tests/fakes/worker.py) in the given mode."""
    worker = Worker("tool", runtime_dir, env={"JMP_FAKE_MODE": mode}, module="tests.fakes.worker")
    worker.start()
    return worker


def worker_of(kind: str) -> psutil.Process:
    """This kernel's one live worker of `kind` ("router", "generator", "tool"), warm or cold."""
    (found,) = workers_of(os.getpid(), kind)
    return found


class KillAt:
    """A hook on `Session.append` (`hook(session)`) that SIGKILLs the `kind` worker when
    `when(event)` holds, up to `times` times, right after that record is appended (before the
    kernel's next step: a subscriber hears of a record only once it is fsynced, on the
    session's commit thread, too late to aim at), and returns only once it has exited (a
    zombie nobody reaped yet: the kernel's I/O thread may not have noticed). Exceptions are
    swallowed, as for a subscriber, so the test asserts on `killed` afterwards."""

    def __init__(self, kind: str, when: Callable[[Any], bool], times: int = 1) -> None:
        self.kind, self.when, self.times = kind, when, times
        self.killed: list[int] = []

    def hook(self, session: Any) -> None:
        append = session.append

        def appended(data: Any, durable: bool = False) -> Any:
            event = append(data, durable)
            with contextlib.suppress(Exception):  # like a subscriber's: never stops the run
                self(event)
            return event

        session.append = appended

    def __call__(self, event: Any) -> None:
        if len(self.killed) >= self.times or not self.when(event):
            return
        victim = worker_of(self.kind)
        victim.send_signal(signal.SIGKILL)
        if gone([victim.pid]):
            self.killed.append(victim.pid)


def stage_started(stage: str) -> Callable[[Any], bool]:
    return lambda e: e.kind == "model_started" and e.data.stage == stage
