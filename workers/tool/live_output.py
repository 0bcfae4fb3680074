"""A running shell command's output so far, for a person watching (ToolProgress): its size, its
line count and its last lines, sent at most every PROGRESS_EVERY_S while it grows.

The tail is plain text (escape sequences removed; a carriage return restarts its line, as a
terminal shows a progress bar), without the terminal's echo of the command or the shell's
prompt marker, and it never shows more than a few characters of a word it cuts
(protocol/text.py): the kernel redacts whole secrets, so a cut must not leave part of one.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from protocol.messages import ToolProgress
from protocol.text import head, tail

PROGRESS_EVERY_S = 0.5
TAIL_LINES = 3
TAIL_LINE_CHARS = 200
RECENT_CHARS = 4096  # what Capture keeps of the newest output, for the tail
PROMPT_MARK = "###PS1JSON###"  # OpenHands' prompt (workers/tool/shell.py PS1_BEGIN)
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
)
_OVERWRITTEN = re.compile(r"[^\n]*\r(?!\n|\Z)")  # a line a carriage return started over


def tail_lines(recent: str, complete: bool = False) -> str:
    """The last TAIL_LINES lines of `recent` (the newest output, maybe cut at its start), each
    at most TAIL_LINE_CHARS, with no cut word shown; `complete`: nothing more will follow."""
    text = _OVERWRITTEN.sub("", _ESCAPES.sub("", recent)).replace("\r", "")
    text = text.split(PROMPT_MARK, 1)[0]  # the shell's prompt after the command: not output
    cut_at_start = len(recent) >= RECENT_CHARS
    lines = text.split("\n")
    if cut_at_start and len(lines) > 1:
        lines = lines[1:]  # the oldest line is a part of one
    elif cut_at_start:
        lines = [tail(lines[0], len(lines[0]), open_start=True)]
    last = len(lines) - 1
    shown = [
        head(line, TAIL_LINE_CHARS, open_end=(n == last and not complete)).rstrip()
        for n, line in enumerate(lines)
    ]
    return "\n".join([s for s in shown if s.strip()][-TAIL_LINES:])


def report_while_running(
    capture: Any,
    ident: str,
    send: Callable[[ToolProgress], None],
    done: threading.Event,
) -> threading.Thread:
    """Start the thread that sends ToolProgress for `capture` until `done` is set."""

    def run() -> None:
        sent = -1
        while not done.wait(PROGRESS_EVERY_S):
            size, lines, recent = capture.progress()
            if size == sent:
                continue
            sent = size
            send(
                ToolProgress(
                    reply_to=ident, output_bytes=size, output_lines=lines, tail=tail_lines(recent)
                )
            )

    thread = threading.Thread(target=run, name="tool-progress", daemon=True)
    thread.start()
    return thread


__all__ = ["report_while_running", "tail_lines"]
