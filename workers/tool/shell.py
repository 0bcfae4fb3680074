"""One bash call on OpenHands' TerminalExecutor, bounded: a hard time limit, an output cap, a
full output that OpenHands' 30,000-character cut does not reach, and big commands delivered
through a file.

- Time: every call blocks until the command ends or its limit (the model's `timeout`, clamped to
  JMP_BASH_TIMEOUT_S, which is also the default) passes; then the command is stopped (C-c, then
  SIGKILL of the terminal's foreground group, then the whole shell) and the result says
  `exit_code -1`, `interrupted`, `reason: "timeout"`. Nothing outlives its call in the
  foreground.
- Output: every byte the terminal prints during the call is also kept here (the PTY reader is
  tapped), up to JMP_BASH_OUTPUT_BYTES; past it the command is stopped the same way
  (`reason: "output_cap"`) and the cut is stated in the text. When OpenHands cut its own text,
  the kept output replaces it.
- Delivery: a command longer than INLINE_CHARS (or with many lines) is written to a file under
  the terminal dir and sourced (`. FILE`): typing megabytes into a PTY fails (EAGAIN) or
  crawls, and sourcing keeps the shell's state (cwd, variables) exactly as typing would.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from workers import reaper
from workers.tool.live_output import RECENT_CHARS, report_while_running
from workers.tool.terminal import settle

INTERRUPT_GRACE_S = 1.0  # after C-c, the command's processes get this long before SIGKILL
INLINE_CHARS = 4000  # longer commands are sourced from a file
INLINE_LINES = 20  # so are commands with more lines (OpenHands paces each line)
BACKSTOP_S = 3 * INTERRUPT_GRACE_S + 5.0  # OpenHands' own limit, after ours has acted
PS1_BEGIN = "\n###PS1JSON###"
OPENHANDS_CUT = "<response clipped><NOTE>Due to the max output limit"
OPENHANDS_SCROLLED = "[Previous command outputs are truncated."


def clamp_timeout(raw: Any, limit_s: float) -> float:
    """The call's time limit: the model's `timeout` when it is a sane number below the limit,
    else the limit (absent, NaN, infinite, negative, zero or absurd values included)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return limit_s
    value = float(raw)
    if not math.isfinite(value) or value <= 0:
        return limit_s
    return min(value, limit_s)


@dataclass
class Capture:
    """What the terminal printed during one call, bounded; `full` is set at the cap. Past the
    terminal's echo of the command (`echo_lines`), it also counts the output and keeps its
    newest RECENT_CHARS, for the live view (workers/tool/live_output.py)."""

    budget: int
    echo_lines: int = 0
    parts: list[str] = field(default_factory=list)
    size: int = 0
    full: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    output_bytes: int = 0
    output_lines: int = 0
    recent: str = ""

    def add(self, text: str) -> None:
        with self.lock:
            if self.full.is_set():
                return
            data = text.encode("utf-8", "replace")
            if self.size + len(data) > self.budget:
                data = data[: max(self.budget - self.size, 0)]
                text = data.decode("utf-8", "ignore")
                self.full.set()
            self.parts.append(text)
            self.size += len(data)
            self._count(text)

    def _count(self, text: str) -> None:
        while self.echo_lines and text:
            _, newline, text = text.partition("\n")
            self.echo_lines -= bool(newline)
        if text:
            self.output_bytes += len(text.encode("utf-8", "replace"))
            self.output_lines += text.count("\n")
            self.recent = (self.recent + text)[-RECENT_CHARS:]

    def progress(self) -> tuple[int, int, str]:
        """(output bytes, output lines, newest output) past the echo, so far."""
        with self.lock:
            return self.output_bytes, self.output_lines, self.recent

    def text(self) -> str:
        with self.lock:
            return "".join(self.parts).replace("\r", "")


class Tap:
    """Installed once on a SubprocessTerminal: copies what its reader thread buffers."""

    def __init__(self, terminal: Any) -> None:
        self.capture: Capture | None = None
        original = terminal._add_text_to_buffer

        def add(text: str) -> None:
            capture = self.capture
            if capture is not None:
                capture.add(text)
            original(text)

        terminal._add_text_to_buffer = add  # the reader thread looks it up on each chunk


@dataclass
class Outcome:
    """How a bounded call ended."""

    observation: Any
    reason: str = ""  # "", "cancelled", "timeout", "output_cap"
    output: str | None = None  # the kept output, when it replaces OpenHands' text
    sent: str = ""


class BashRunner:
    """Runs bash actions on one TerminalExecutor, within the limits (see the module doc)."""

    def __init__(self, terminal_dir: str | None, timeout_s: float, output_bytes: int) -> None:
        self.terminal_dir = Path(terminal_dir) if terminal_dir else None
        self.timeout_s = timeout_s
        self.output_bytes = output_bytes

    def run(
        self,
        executor: Any,
        action: Any,
        cancel: threading.Event,
        report: Callable[[Any], None] | None = None,
        ident: str = "",
    ) -> Outcome:
        """Run the call; `report` (ToolProgress of `ident`) hears its output while it grows."""
        shell = executor.session.terminal
        if not getattr(shell, "_jmp_settled", False):
            settle(shell)
        limit_s = clamp_timeout(action.timeout, self.timeout_s)
        command = action.command
        if not action.is_input and self._too_long(command):
            command = self._sourced(command)
        action = action.model_copy(update={"command": command, "timeout": limit_s + BACKSTOP_S})
        tap = self._tap(shell)
        budget = self.output_bytes + 2 * len(command.encode()) + 4096
        capture = Capture(budget, echo_lines=command.count("\n") + 1)
        tap.capture = capture
        done, why = threading.Event(), list[str]()
        guard = threading.Thread(
            target=_guard, args=(shell, cancel, capture, limit_s, done, why), daemon=True
        )
        guard.start()
        reporter = report_while_running(capture, ident, report, done) if report else None
        try:
            observation = executor(action)
        finally:
            done.set()
            tap.capture = None
            guard.join(0.2)
            if reporter is not None:
                reporter.join(0.2)  # no progress of this call after its result
        reason = why[0] if why else ""
        return Outcome(observation, reason, self._kept(observation, capture, command), command)

    def _too_long(self, command: str) -> bool:
        return len(command) > INLINE_CHARS or command.count("\n") >= INLINE_LINES

    def _sourced(self, command: str) -> str:
        if self.terminal_dir is None:
            return command
        folder = self.terminal_dir / "commands"
        # inside the session directory: the owner's alone, whatever the umask (issue 32)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{uuid.uuid4().hex[:16]}.sh"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with open(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(command + "\n")
        return f". {shlex.quote(str(path))}"

    def _tap(self, shell: Any) -> Tap:
        tap = getattr(shell, "_jmp_tap", None)
        if tap is None:
            tap = shell._jmp_tap = Tap(shell)
        return tap

    def _kept(self, observation: Any, capture: Capture, sent: str) -> str | None:
        """The kept output when OpenHands cut its text or the cap was reached, else None."""
        text = observation.text or ""
        prefix = getattr(observation.metadata, "prefix", "") or ""
        if not (
            capture.full.is_set() or OPENHANDS_CUT in text or prefix.startswith(OPENHANDS_SCROLLED)
        ):
            return None
        raw = capture.text()
        end = raw.rfind(PS1_BEGIN)
        if end != -1 and not capture.full.is_set():
            raw = raw[:end]
        output = _without_echo(raw, sent)
        if capture.full.is_set():
            output += (
                f"\n[output cut at {self.output_bytes} bytes (JMP_BASH_OUTPUT_BYTES); "
                "the command was stopped]"
            )
        return output


def _without_echo(raw: str, sent: str) -> str:
    """The terminal's echo of the sent command removed from the front of the output."""
    from openhands.tools.terminal.terminal.terminal_session import _remove_command_prefix

    raw = re.sub(r"\x1b\[\?2004[hl]", "", raw)
    return str(_remove_command_prefix(raw, sent))


def _guard(
    shell: Any,
    cancel: threading.Event,
    capture: Capture,
    limit_s: float,
    done: threading.Event,
    why: list[str],
) -> None:
    """Stop the running command on cancel, at the time limit or at the output cap."""
    deadline = time.monotonic() + limit_s
    while not done.is_set():
        if cancel.is_set():
            why.append("cancelled")
        elif capture.full.is_set():
            why.append("output_cap")
        elif time.monotonic() >= deadline:
            why.append("timeout")
        if why:
            break
        done.wait(0.05)
    else:
        return
    stop(shell, done)


def stop(shell: Any, done: threading.Event) -> None:
    """C-c; then SIGKILL the foreground job; then the whole shell (OpenHands then returns)."""
    with contextlib.suppress(Exception):
        shell.send_keys("C-c")  # the tty delivers SIGINT to the foreground job's group
    if done.wait(INTERRUPT_GRACE_S):
        return
    _kill_foreground(shell)
    if done.wait(INTERRUPT_GRACE_S):
        return
    with contextlib.suppress(Exception):
        shell.close()  # a shell busy in a builtin loop: end it; the next call starts a new one


def _kill_foreground(shell: Any) -> None:
    process = getattr(shell, "process", None)
    if process is None:
        return
    try:
        group = os.tcgetpgrp(shell._pty_master_fd)
        if group > 0 and group != os.getpgid(process.pid):
            os.killpg(group, signal.SIGKILL)
            return
    except (OSError, TypeError, AttributeError):
        pass
    with contextlib.suppress(psutil.Error):  # no job control to go by: every descendant
        reaper.kill(psutil.Process(process.pid).children(recursive=True))
