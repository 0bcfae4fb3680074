"""workers/reaper.py: the one kill mechanism of workers (real processes, SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil

from workers import reaper


def group_members(pgid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def leader_of_three() -> subprocess.Popen[bytes]:
    """`sh` leading a new process group with two `sleep`s in it."""
    sh = subprocess.Popen(
        ["sh", "-c", "sleep 301.17 & sleep 301.17 & wait"], start_new_session=True
    )
    deadline = time.monotonic() + 20  # a liveness bound, not a speed test
    while len(group_members(sh.pid)) < 3:
        assert time.monotonic() < deadline, "the group did not form"
        time.sleep(0.05)
    return sh


def test_groups_kills_a_leaders_whole_group_and_waits() -> None:
    sh = leader_of_three()
    try:
        assert reaper.kill([psutil.Process(sh.pid)], groups=True, wait_s=10) == []
        sh.wait(10)
        deadline = time.monotonic() + 10
        while group_members(sh.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # the sleeps are init's (or a subreaper's) to reap
        assert group_members(sh.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sh.pid, signal.SIGKILL)
        sh.wait()


def test_without_groups_only_the_process_itself() -> None:
    sh = leader_of_three()
    try:
        assert reaper.kill([psutil.Process(sh.pid)], wait_s=10) == []
        sh.wait(10)
        assert len(group_members(sh.pid)) == 2  # its sleeps live on
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sh.pid, signal.SIGKILL)
        sh.wait()


def test_a_gone_process_is_skipped_never_signalled() -> None:
    proc = subprocess.Popen(["true"])
    handle = psutil.Process(proc.pid)
    proc.wait()  # reaped: its pid may now be anyone's
    assert reaper.kill([handle, handle], groups=True, wait_s=1) == []
