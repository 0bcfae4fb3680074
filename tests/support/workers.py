"""Helpers for worker tests: process searches with deadlines, closing within a time limit."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from kernel.supervision.supervisor import Worker


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
