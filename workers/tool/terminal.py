"""How the tool worker's terminal starts: bash without rc files, OpenHands' SubprocessTerminal
without its blind second, and a shell proven settled before the worker says Ready.

OpenHands' `SubprocessTerminal.initialize` types its setup line (PS1, PROMPT_COMMAND), sleeps a
blind 1.0 s and clears the screen. That second was most of a warm worker's first effect
(issue 11), and it is also not enough: on a loaded machine bash has not run the line by then.
`settle` replaces the guess with proof, so `start_terminal` skips the sleep and settles instead.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workers.tool.live_output import PROMPT_MARK

SETTLE_S = 60.0  # a new shell that has not run its setup line by then is reported, not waited on
BLIND_WAIT_S = 1.0  # initialize's `time.sleep(1.0)`, the one wait that is skipped
_PATCH = threading.Lock()  # one initialize at a time sees the patched `time`
PROMPT_END = "###PS1END###"  # the end of OpenHands' PS1 (its start: live_output.PROMPT_MARK)


def start_terminal(workspace: str, shell_path: str | None, save_dir: str | None) -> Any:
    """A settled OpenHands TerminalExecutor on the subprocess terminal (never tmux: its server
    would outlive our tree) in `workspace`; on any failure its shell is closed."""
    from openhands.tools.terminal.impl import TerminalExecutor

    with without_blind_wait():
        executor = TerminalExecutor(
            working_dir=workspace,
            terminal_type="subprocess",
            shell_path=shell_path,
            full_output_save_dir=save_dir,
        )
    try:
        settle(executor.session.terminal)  # before Ready: the first call finds a settled shell
    except BaseException:
        executor.close()
        raise
    return executor


@contextlib.contextmanager
def without_blind_wait() -> Iterator[list[float]]:
    """While held, the 1.0 s sleep of `SubprocessTerminal.initialize` on this thread returns at
    once (once); every other sleep, on any thread, is real. Yields the skipped waits, so a test
    notices when OpenHands changes its start (then nothing is skipped and nothing breaks)."""
    from openhands.tools.terminal.terminal import subprocess_terminal as module

    skipped: list[float] = []
    if getattr(module, "time", None) is not time:
        yield skipped
        return
    me = threading.get_ident()

    class _Time:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            if seconds == BLIND_WAIT_S and threading.get_ident() == me and not skipped:
                skipped.append(seconds)
                return
            time.sleep(seconds)

    with _PATCH:
        module.time = _Time()  # type: ignore[assignment,attr-defined]
        try:
            yield skipped
        finally:
            module.time = time  # type: ignore[attr-defined]


def rc_free_bash(folder: Path) -> str | None:
    """A launcher for `bash --noprofile --norc`, for OpenHands' `bash -i` (None: no bash).

    The worker's environment is the kernel's, which the person's own shell already set up, so
    the terminal does not source ~/.bashrc again: rc files are slow (pyenv's rehash in it waits
    60 s on a lock a killed shell left behind), print text into the first command's output,
    and would make the same session behave differently on each machine.
    """
    bash = shutil.which("bash")
    if bash is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bash-norc"
    temp = folder / f".bash-norc.{os.getpid()}"
    temp.write_text(f'#!/bin/sh\nexec {shlex.quote(bash)} --noprofile --norc "$@"\n')
    temp.chmod(0o700)
    os.replace(temp, path)
    return str(path)


def settle(shell: Any, timeout_s: float = SETTLE_S) -> None:
    """Return once bash has run everything typed into a new terminal, with a clean screen.

    OpenHands' SubprocessTerminal.initialize types its setup line (PS1, PROMPT_COMMAND), sleeps
    a blind second and clears the screen. On a loaded machine bash has not run that line by
    then: its echo and first prompt arrive after the clear, and the first command's call reads
    them as its own output, finished with exit code 0, while the command still runs. Bash runs
    its input in order, so a marker that only the executed command prints (the echo of the
    typed line shows `%s`, not the joined marker), followed by a prompt, proves the setup ran.
    """
    token = uuid.uuid4().hex[:12]
    shell._write_pty(f"printf 'JMP_SETTLED_%s\\n' {token}\n".encode())  # as initialize types
    marker = f"JMP_SETTLED_{token}"  # the typed line's echo never holds it joined
    deadline = time.monotonic() + timeout_s
    ok = shell._wait_for_output(marker, timeout=timeout_s)
    ok = ok and shell._wait_for_prompt(timeout=max(deadline - time.monotonic(), 0.1))
    if not ok:
        print(f"tool worker: the shell did not settle within {timeout_s:.0f} s", file=sys.stderr)
    keep_the_last_prompt_on_clear(shell)
    shell.clear_screen()
    shell._jmp_settled = True


def keep_the_last_prompt_on_clear(shell: Any) -> None:
    """Make `shell.clear_screen` keep the last prompt instead of typing an Enter for a new one.

    OpenHands clears the screen after every command and means to keep the output from the last
    prompt on, but it looks for the prompt with `\n` line ends in the PTY's raw `\r\n` text,
    never finds it, empties the buffer and types an Enter for bash to draw a prompt again. That
    prompt arrives later. On a loaded machine the next command is typed first, and then the
    prompt drawn for the Enter counts as that command's end: it returns its own echo with exit
    code 0 while it still runs (seen in the suite under two processes). Kept, the last prompt
    is on the screen when the next command starts, and nothing is typed but commands. Where
    no whole prompt is buffered, OpenHands' clear runs as it is."""
    upstream = shell.clear_screen

    def clear_screen() -> None:
        with shell.output_lock:
            data = "".join(shell.output_buffer)
            start, end = data.rfind(PROMPT_MARK), data.rfind(PROMPT_END)
            if start != -1 and end > start:
                line = data.rfind("\n", 0, start)  # the line end before it is part of the prompt
                shell.output_buffer.clear()
                shell.output_buffer.append(data[max(line, 0) :])
                return
        upstream()

    shell.clear_screen = clear_screen
