"""The readable view a person gets (issue 23): a running command shows its time and newest
output, refreshed, in a real terminal (tmux) and nothing of it into a pipe; results show the
tool's own output (a diff for a write or an edit), not the text written for the model; every
ending closes with the next command to type."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support.cli import Cli, json_line

# A command printing 4 ticks, each once the test opened its gate: the test opens the next one
# when the view shows this tick at a later second than the last (an event, not a timer).
TICKS = "for i in 1 2 3 4; do echo tick $i; until [ -e {gates}/gate.$i ]; do sleep 0.05; done; done"
RUNNING = re.compile(r"… bash running (\d+) s · (\d+) lines")


def _script_ticks(jmp: Cli) -> None:
    command = TICKS.format(gates=shlex.quote(str(jmp.tmp)))
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": command}}}, {"text": "Ticked."}])


class Tmux:
    """A private tmux server (its own socket) with one 120x40 pane running `argv`."""

    def __init__(self, tmp: Path, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.socket = f"jmp-view-{uuid.uuid4().hex[:8]}"
        script = tmp / "in-terminal.sh"
        words = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
        script.write_text(f"cd {shlex.quote(str(cwd))}\n{shlex.join(words)}\necho EXIT $?\n")
        self.tmux("new-session", "-d", "-x", "120", "-y", "40", f"sh {script}; sleep 600")

    def tmux(self, *args: str) -> str:
        argv = ["tmux", "-L", self.socket, "-f", "/dev/null", *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-S", "-200")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed here")
def test_a_running_command_shows_its_time_and_output_while_it_runs(jmp: Cli) -> None:
    """The command goes on only as the view shows it going on: a tick seen at a later second
    opens the next (4 ticks over ~3 s, where a fixed 10-second command stood before)."""
    _script_ticks(jmp)
    env = jmp.env(TERM="xterm")
    terminal = Tmux(jmp.tmp, jmp.argv("--workspace", str(jmp.workspace), "tick", json_flag=False),
                    env, jmp.workspace)  # fmt: skip
    seen: list[tuple[int, int, str]] = []  # (seconds, lines, newest tail line) while running
    opened, opened_at = 0, -1  # the gates opened, and the seconds shown when the last opened
    try:
        deadline = time.monotonic() + 240  # a hung run fails here instead of hanging the suite
        while "EXIT " not in (screen := terminal.screen()):
            assert time.monotonic() < deadline, screen
            match = RUNNING.search(screen)
            if match:
                ticks = re.findall(r"│ (tick \d+)", screen)
                seen.append((int(match[1]), int(match[2]), ticks[-1] if ticks else ""))
                if seen[-1][2] == f"tick {opened + 1}" and seen[-1][0] > opened_at:
                    opened, opened_at = opened + 1, seen[-1][0]
                    (jmp.tmp / f"gate.{opened}").touch()
            time.sleep(0.2)
    finally:
        terminal.close()
    assert seen, screen
    # Refreshed while it ran: the time went on and the output's newest line changed.
    assert len({s for s, _, _ in seen}) >= 3, seen
    assert len({t for _, _, t in seen if t}) >= 3, seen
    assert max(lines for _, lines, _ in seen) >= 3, seen
    assert "EXIT 0" in screen
    # The block is gone once the call ended; the result shows the output and the next step.
    assert not RUNNING.search(screen) and "✓ bash ok exit 0" in screen and "tick 1" in screen
    assert re.search(r"\[completed\] session [0-9a-f]{32} · kept in ", screen)
    assert "follow up: jmp --sessions-dir" in screen and "'your next request'" in screen


def test_into_a_pipe_the_view_has_no_status_block_and_shows_the_tools_output(jmp: Cli) -> None:
    """Not a terminal: no refreshed block. A command's output is shown without the note written
    for the model; a write and an edit show unified diffs (2b9f963 showed the editor's message
    "Review the changes and make sure they are as expected...")."""
    jmp.jev.script([
        {"route": "bash"}, {"route": "write"}, {"route": "edit"}, {"route": "done"},
        {"completion_review": "complete"},
    ])  # fmt: skip
    edit = {"command": "str_replace", "path": "a.py", "old_str": "x = 1", "new_str": "x = 2"}
    jmp.flash.queue([
        {"tool_call": {"arguments": {"command": "echo hello; sleep 2; echo world"}}},
        {"tool_call": {"arguments": {"path": "a.py", "file_text": "print('hi')\nx = 1\n"}}},
        {"tool_call": {"arguments": edit}},
        {"text": "Done."},
    ])  # fmt: skip
    run = jmp.run("--workspace", str(jmp.workspace), "go", json_flag=False)
    assert run.code == 0, run.stderr
    out = run.stdout
    assert "\r" not in out and "\x1b" not in out and "bash running" not in out
    assert "    hello\n    world\n" in out and "[The command completed" not in out
    assert "    --- /dev/null\n    +++ b/a.py\n" in out and "    +x = 1\n" in out
    assert "    --- a/a.py\n    +++ b/a.py\n" in out and "    -x = 1\n    +x = 2\n" in out
    assert "Review the changes" not in out and "cat -n" not in out
    sid = re.search(r"\[completed\] session ([0-9a-f]{32})", out)[1]
    assert f"follow up: jmp --sessions-dir {jmp.home} --session {sid} 'your next request'" in out


def test_a_run_that_ends_in_error_closes_with_the_retry_command(jmp: Cli) -> None:
    """2b9f963 printed no closing line for `error` at all."""
    jmp.jev.script([{"route": "write"}])
    jmp.flash.fault("http500", count=10)
    run = jmp.run("--workspace", str(jmp.workspace), "write a file", json_flag=False)
    assert run.code == 2
    sid = re.search(r"\[error\] session ([0-9a-f]{32}) · kept in ", run.stdout)[1]
    assert f"retry with: jmp --sessions-dir {jmp.home} --session {sid}\n" in run.stdout


def test_an_interrupted_run_closes_with_the_acknowledge_command(jmp: Cli) -> None:
    """A session whose call was cut off by a kill: its reopening is blocked, and the closing
    line names --ack-interrupted (what unblocks it), after checking what the call did."""
    import os
    import signal

    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": "sleep 30"}}}])
    proc = subprocess.Popen(
        jmp.argv("--workspace", str(jmp.workspace), "slow"), cwd=jmp.workspace,
        env=jmp.env(), stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    sid = ""
    for raw in proc.stdout:
        line = json_line(raw)
        sid = line.get("session_id") or sid
        if line["kind"] == "tool_started":
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    proc.stdout.close()
    run = jmp.run("--session", sid, json_flag=False)
    assert run.code == 2
    assert f"[blocked] session {sid}" in run.stdout
    assert "check what the interrupted call did, then: jmp --sessions-dir" in run.stdout
    assert f"--session {sid} --ack-interrupted\n" in run.stdout
