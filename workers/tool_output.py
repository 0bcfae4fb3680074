"""What the tool worker answers: executor observations as ToolResults, in plain text."""

from __future__ import annotations

import re
from typing import Any

from protocol.messages import ToolResult
from workers.shell import BashRunner, Outcome

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, bracketed-paste toggles
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|[\x00-\x08\x0b-\x1f\x7f]"  # remaining control characters except \t and \n
)


def strip_ansi(text: str) -> str:
    """Terminal output as plain text: escape sequences and control characters removed."""
    return _ANSI.sub("", text.replace("\r\n", "\n"))


def editor_result(ident: str, obs: Any, seconds: float) -> ToolResult:
    """ToolResult of a file-editor observation."""
    text = strip_ansi(obs.text)
    return ToolResult(
        reply_to=ident,
        status="error" if obs.is_error else "ok",
        text=text,
        error=text if obs.is_error else "",
        seconds=seconds,
    )


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
    )
