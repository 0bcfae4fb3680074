"""A read whose tool worker dies (killed, or stopped at the file tools' limit) had no effect
(issue 32 item 3): the call ends failed, nothing is uncertain, the run goes on, and a follow-up
runs without `--ack-interrupted`. Through the real CLI (the kill on both spawn paths).

The read is held where no check can refuse it: the file lies on a FUSE disk (the power-cut
simulator) that freezes at the first `open` of its name, so the worker waits inside the
kernel until the test kills it, or the kernel's limit does.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jmp_lab.chaos.powercut.control import LossyDisk
from tests.support.cli import Cli, json_lines, tool_call, wait_for_line
from tests.support.lossy import fuse, lossy_disk
from tests.support.warm import workers_of

pytestmark = [fuse, pytest.mark.timeout(400)]


@contextlib.contextmanager
def _held_read(jmp: Cli) -> Iterator[tuple[Path, LossyDisk]]:
    """A file under the workspace whose first open freezes its disk, and that disk."""
    with lossy_disk(jmp.workspace / "fs") as disk:
        (disk.mount / "slow.txt").write_text("slow text\n")
        disk.arm([{"op": "open", "pattern": r"slow\.txt", "action": "freeze-before"}])
        yield disk.mount / "slow.txt", disk


def _script(jmp: Cli, path: Path) -> None:
    rel = str(path.relative_to(jmp.workspace))
    jmp.jev.script([{"route": "read"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([tool_call(path=rel), {"text": "could not read it"}])


def _the_call_ended(line: dict[str, Any]) -> bool:
    return line["kind"] in ("tool_finished", "tool_uncertain")


def _follow_up_runs(jmp: Cli, session: str) -> None:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "followed up"}])
    again = jmp.run("--session", session, "and now?")
    assert again.code == 0 and again.result["status"] == "completed", again.stdout[-2000:]
    assert not [e for e in jmp.log(session) if e["kind"] == "tool_uncertain"]


def _finished_read(jmp: Cli, session: str) -> dict[str, Any]:
    (read,) = [e["data"] for e in jmp.log(session) if e["kind"] == "tool_finished"]
    assert read["tool"] == "read" and read["status"] == "error", read
    assert read["reason"] == "worker_exit" and "changes nothing" in read["error"], read
    return dict(read)


@pytest.mark.parametrize("warm", ["1", "0"], ids=["warm", "cold"])
def test_a_read_whose_worker_is_killed_needs_no_acknowledgement(jmp: Cli, warm: str) -> None:
    """On both spawn paths: a worker forked by the suite's pool, and JMP_WARM=0."""
    jmp.extra_env["JMP_WARM"] = warm
    with _held_read(jmp) as (path, disk):
        _script(jmp, path)
        proc = jmp.start("--workspace", str(jmp.workspace), "read the slow file")
        fired = disk.wait(300)  # the worker is inside open(2) of slow.txt
        assert fired, "the read never opened the file"
        (worker,) = workers_of(proc.pid, "tool")
        worker.send_signal(signal.SIGKILL)
        disk.cut()  # a wait inside FUSE ends only with an answer: EIO, from here on
        stdout, stderr = proc.communicate(timeout=300)
    result = json_lines(stdout)[-1]["data"]
    assert proc.returncode == 0 and result["status"] == "completed", stdout[-2000:] + stderr
    session = result["session_id"]
    assert "SIGKILL" in _finished_read(jmp, session)["error"]
    _follow_up_runs(jmp, session)


def test_a_read_that_does_not_answer_is_stopped_at_the_file_tools_limit(jmp: Cli) -> None:
    """The kernel stops it (JMP_FILE_TOOL_TIMEOUT_S), kills its worker and goes on; the
    frozen disk is cut only once the client has been told the read failed (the killed
    worker's wait inside FUSE ends with the disk's answer)."""
    jmp.extra_env["JMP_FILE_TOOL_TIMEOUT_S"] = "3"
    with _held_read(jmp) as (path, disk):
        _script(jmp, path)
        proc = jmp.start("--workspace", str(jmp.workspace), "read the slow file")
        seen = wait_for_line(proc, _the_call_ended, timeout=300)
        disk.cut()
        stdout, stderr = proc.communicate(timeout=300)
    lines = seen + json_lines(stdout)
    result = lines[-1]["data"]
    assert proc.returncode == 0 and result["status"] == "completed", stdout[-2000:] + stderr
    session = result["session_id"]
    read = _finished_read(jmp, session)
    assert "timeout" in read["error"], read
    _follow_up_runs(jmp, session)


def test_a_read_stopped_by_ctrl_c_ends_the_run_cancelled_and_needs_no_acknowledgement(
    jmp: Cli,
) -> None:
    with _held_read(jmp) as (path, disk):
        _script(jmp, path)
        proc = jmp.start("--workspace", str(jmp.workspace), "read the slow file")
        assert disk.wait(300), "the read never opened the file"
        proc.send_signal(signal.SIGINT)  # Ctrl+C: the kernel cancels, then kills the worker
        seen = wait_for_line(proc, _the_call_ended, timeout=300)
        disk.cut()
        stdout, stderr = proc.communicate(timeout=300)
    result = (seen + json_lines(stdout))[-1]["data"]
    assert result["status"] == "cancelled", stdout[-2000:] + stderr
    session = result["session_id"]
    (read,) = [e["data"] for e in jmp.log(session) if e["kind"] == "tool_finished"]
    assert read["status"] == "error" and read["reason"] == "cancelled", read
    _follow_up_runs(jmp, session)


def test_a_read_whose_kernel_is_killed_needs_no_acknowledgement(jmp: Cli) -> None:
    """The next open finds the read with no end: it records it failed (reason kernel_exit),
    not uncertain, and the follow-up runs."""
    with _held_read(jmp) as (path, disk):
        _script(jmp, path)
        proc = jmp.start("--workspace", str(jmp.workspace), "read the slow file")
        assert disk.wait(300), "the read never opened the file"
        proc.send_signal(signal.SIGKILL)  # the kernel alone; its workers find out
        stdout, _ = proc.communicate(timeout=60)
        disk.cut()
    session = json_lines(stdout)[0]["session_id"]
    _follow_up_runs(jmp, session)
    (read,) = [e["data"] for e in jmp.log(session) if e["kind"] == "tool_finished"]
    assert read["status"] == "error" and read["reason"] == "kernel_exit", read
