"""The kernel's process-tree record: what it remembers, and that its kill spares a recycled pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kernel.supervision.proctree import TreeRecord
from tests.support.workers import pid_running, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _start_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[19])


def test_a_recorded_grandchild_is_killed_after_leaving_group_session_and_token() -> None:
    """Only the record can find it: its own session, no token in its environment, and its
    parent dead (so it was reparented away from the root)."""
    root = subprocess.Popen(
        ["sh", "-c", "env -i setsid sleep 1000 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    assert root.stdout is not None
    grandchild = int(root.stdout.readline())
    tree = TreeRecord(root.pid, token="never-inherited")
    try:
        wait_until(lambda: os.getsid(grandchild) == grandchild, 10, "the setsid")
        tree.record()
        assert tree.seen.get(grandchild) == _start_ticks(grandchild)
        root.kill()
        root.wait()
        assert tree.kill_all() >= 1
        wait_until(lambda: not pid_running(grandchild), 10, "the grandchild's death")
    finally:
        root.kill()
        root.wait()
        root.stdout.close()
        if pid_running(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_pid_recorded_with_another_start_time_is_not_killed() -> None:
    """A recorded pid now held by another process (pid reuse) is left alone."""
    bystander = subprocess.Popen(["sleep", "1000"])
    tree = TreeRecord(root_pid=2**22 + 1, token="never-inherited")  # a root that is gone
    tree.seen[bystander.pid] = _start_ticks(bystander.pid) - 1
    try:
        tree.kill_all()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_recording_reads_proc_without_importing_psutil() -> None:
    """Every worker's start records its tree in the wire thread; psutil's import there (about
    a bare interpreter's start) delayed the first model request (issue 11)."""
    code = (
        "import subprocess, sys\n"
        "from kernel.supervision.proctree import TreeRecord\n"
        "import os\n"
        "child = subprocess.Popen(['sleep', '1000'])\n"
        "tree = TreeRecord(os.getpid(), 'x')\n"
        "tree.record()\n"
        "child.kill()\n"
        "print(child.pid in tree.seen, 'psutil' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "False"]


def test_the_root_is_killed_and_left_for_its_owner_to_reap() -> None:
    """A root outside a group of its own, holding the token: killing it through the survivors
    waited on (so reaped) it, and its owner's Popen then read the SIGKILL as exit code 0 (seen
    as 'tool worker ... exited with status 0 (no heartbeat ...)')."""
    from host.spawn import TOKEN_ENV

    root = subprocess.Popen(["sleep", "1000"], env=os.environ | {TOKEN_ENV: "tok-root"})
    try:
        TreeRecord(root.pid, "tok-root").kill_all()
        assert root.wait(10) == -signal.SIGKILL
    finally:
        root.kill()
        root.wait()
