"""A disk that fills mid-run: the result says which session it was (issue 32, item 7).

At 623aa1b `jmp --json` ended such a run with `"session_id": null` though its session existed
(its first records were printed): the error path knew only the `--session` given. The sessions
dir and the workspace share a tiny tmpfs (a private mount namespace); the untrusted code (the
model's shell, a task script's tool) fills it; the kernel's next write fails with ENOSPC.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import HarnessCli
from tests.support.cli import Cli, Run

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="needs root with unshare (to mount a tiny tmpfs in a private mount namespace)",
)

FILL_TASK = """
import jev_harness as jev

def build(inputs):
    def fill(task, chosen):
        with open(inputs["fill"], "wb") as f:
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError:
                pass
        return jev.Outcome("ok", "filled", text="the disk is full now")

    task = jev.Task([], verifier=lambda task: False)
    task.register(jev.Tool("disk.fill", "fill the disk", (), fill))
    return task

workflow = jev.TaskScript(build)
"""


def in_tmpfs(disk: Path) -> list[str]:
    """The command in a private mount namespace with a 1 MiB tmpfs on `disk` holding `ws/`."""
    setup = f"mount -t tmpfs -o size=1m tmpfs {disk}; mkdir {disk}/ws"
    return ["unshare", "-m", "sh", "-ec", f'{setup}; exec "$@"', "sh"]


def check_named(out: Run, disk: Path) -> str:
    """The session the run's result names (it must: ENOSPC mid-run, issue 32 item 7)."""
    assert out.code == 2, out.stdout[-2000:] + out.stderr[-2000:]
    sid = next(line["session_id"] for line in out.lines if line["kind"] == "session")
    result = out.result
    assert "ENOSPC" in result["summary"], result
    assert result["session_id"] == sid, "the result does not say which session it was"
    assert result["session_dir"] == str(disk / "sessions" / sid), result
    assert out.lines[-1]["session_id"] == sid  # the line's own field too
    return str(sid)


@needs_root
def test_jmp_json_names_the_session_when_the_disk_fills_mid_run(jmp: Cli) -> None:
    disk = jmp.tmp / "disk"
    disk.mkdir()
    jmp.jev.script([{"route": "bash"}])
    command = f"head -c 4M /dev/zero > {disk}/ws/fill; echo filled"
    jmp.flash.queue([{"tool_call": {"arguments": {"command": command}}}])
    argv = jmp.argv("--sessions-dir", str(disk / "sessions"), "--workspace", str(disk / "ws"))
    out = jmp.exec([*in_tmpfs(disk), *argv, "fill the disk"], cwd=Path("/"), timeout=200)
    check_named(out, disk)
    assert [line["kind"] for line in out.lines if line["kind"] == "tool_started"]


@pytest.fixture
def harness(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


@needs_root
def test_jev_harness_run_json_names_the_session_when_the_disk_fills_mid_run(
    harness: HarnessCli,
) -> None:
    disk = harness.tmp / "disk"
    disk.mkdir()
    script = harness.tmp / "fill_task.py"
    script.write_text(FILL_TASK)
    harness.home = disk / "sessions"
    inputs = json.dumps({"fill": str(disk / "ws" / "fill")})
    argv = harness.run_argv(script, "fill the disk", inputs)
    out = harness.call([*in_tmpfs(disk), *argv], timeout=200)
    sid = check_named(out, disk)  # the disk is gone with the run's mount namespace
    assert out.result["session_dir"] == str(disk / "sessions" / sid)
