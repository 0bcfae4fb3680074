"""What the tool worker answers: executor observations as ToolResults, in plain text.

Each result also says what a person is shown of it (`display`, the readable view): a shell
command's output without the notes written for the model, the text a read returned, a unified
diff of what a write or an edit changed. The model keeps getting `text`.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from pathlib import Path
from typing import Any

from protocol.messages import ToolResult
from workers.tool.shell import BashRunner, Outcome

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, bracketed-paste toggles
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|[\x00-\x08\x0b-\x1f\x7f]"  # remaining control characters except \t and \n
)


def strip_ansi(text: str) -> str:
    """Terminal output as plain text: escape sequences and control characters removed."""
    return _ANSI.sub("", text.replace("\r\n", "\n"))


DIFF_SOURCE_CHARS = 1_000_000  # a larger file's change is shown as the model's text
_CAT_N_HEADER = "Here's the result of running `cat -n` on "


def editor_result(
    ident: str, obs: Any, seconds: float, workspace: Path | None = None, before: str | None = None
) -> ToolResult:
    """ToolResult of a file-editor observation. `before`: the file's text before a write
    (OpenHands does not keep it for `create`); None when it did not exist."""
    text = strip_ansi(obs.text)
    display = "" if obs.is_error else _editor_display(obs, text, workspace, before)
    return ToolResult(
        reply_to=ident,
        status="error" if obs.is_error else "ok",
        text=text,
        error=text if obs.is_error else "",
        seconds=seconds,
        display=display,
    )


def _editor_display(obs: Any, text: str, workspace: Path | None, before: str | None) -> str:
    command = getattr(obs, "command", "")
    if command == "view":
        head, _, rest = text.partition("\n")
        return rest if head.startswith(_CAT_N_HEADER) else text
    new = getattr(obs, "new_content", None)
    old = before if command == "create" else getattr(obs, "old_content", None)
    if not isinstance(new, str) or not (old is None or isinstance(old, str)):
        return ""
    if len(new) > DIFF_SOURCE_CHARS or len(old or "") > DIFF_SOURCE_CHARS:
        return ""
    return unified_diff(old, new, _shown_path(str(getattr(obs, "path", "") or ""), workspace))


def previous_text(path: str) -> str | None:
    """A file's text before a write replaces it, for the diff; None when there is none (or it
    is not a regular file: a FIFO is never waited on). Larger files: only their start."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, DIFF_SOURCE_CHARS + 1).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def unified_diff(old: str | None, new: str, name: str) -> str:
    """`diff -u` of a file's text (old None: it was created), or a note when nothing changed."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{name}",
        tofile=f"b/{name}",
    )
    out = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    return out.rstrip("\n") or f"{name}: unchanged"


def _shown_path(path: str, workspace: Path | None) -> str:
    if workspace is not None and path.startswith(str(workspace) + os.sep):
        return path[len(str(workspace)) + 1 :]
    return path


def bash_result(ident: str, outcome: Outcome, bash: BashRunner, seconds: float) -> ToolResult:
    """ToolResult of a shell command: the real exit code when it finished; when it was stopped
    (a limit, or Ctrl+C/cancel) `exit_code -1` whatever the shell said after C-c (130, 137, none)
    and the fact itself: `interrupted: true` with the reason."""
    obs = outcome.observation
    meta = obs.metadata
    body = obs.text if outcome.output is None else outcome.output
    suffix = meta.suffix
    code = -1 if outcome.reason else obs.exit_code  # stopped: unfinished, never success
    error = ""
    if outcome.reason in ("timeout", "output_cap"):
        limit = (
            f"its time limit ({bash.timeout_s:g} s max, JMP_BASH_TIMEOUT_S)"
            if outcome.reason == "timeout"
            else f"the output cap ({bash.output_bytes} bytes, JMP_BASH_OUTPUT_BYTES)"
        )
        error = f"stopped at {limit}; the command did not finish"
        suffix = f"\n[{error}.]"
    elif outcome.reason == "cancelled":
        error = "interrupted by cancel"
        # The shell's own line after C-c ("exit code 130") would contradict exit_code -1.
        suffix = "\n[interrupted by cancel; the command did not finish.]"
    prefix = meta.prefix if outcome.output is None else ""  # kept output is whole: no "[...]"
    text = strip_ansi(f"{prefix}{body}{suffix}").strip("\n")
    if not error and obs.is_error:
        error = text
    elif not error and code is not None and code > 0:
        error = f"exit code {code}"
    return ToolResult(
        reply_to=ident,
        status="error" if error else "ok",
        exit_code=code,
        text=text,
        error=error,
        seconds=seconds,
        interrupted=bool(outcome.reason),
        reason=outcome.reason,
        display=strip_ansi(f"{prefix}{body}").strip("\n"),  # without OpenHands' exit-code note
    )
