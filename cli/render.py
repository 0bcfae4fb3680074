"""The readable view's words: one event as lines, a running call's status block, and the
closing lines of a run with the next command to type. Pure functions; cli/printer.py prints
them (redacted, made terminal-safe). Stdlib only."""

from __future__ import annotations

import shlex
import unicodedata
from typing import TYPE_CHECKING, Any

from protocol.text import head

if TYPE_CHECKING:
    from protocol.events import Event

PREVIEW_LINES = 8  # of a tool's output
DIFF_LINES = 40  # of a write's or an edit's diff
PREVIEW_CHARS = 160
TARGET_CHARS = 160


def render(event: Event) -> str | None:
    """The live-view line(s) for one event, or None for events the view leaves out."""
    d = event.data
    match event.kind:
        case "session":
            return f"session {d.session_id} · workspace {d.workspace}"
        case "user":
            return f"> {clip(d.text)}"
        case "route" | "completion_review":
            return f"{event.kind.replace('_', ' ')} → {d.choice} ({d.confidence:.2f})"
        case "argument_offload":
            return f"  arguments for {d.tool} built in code (no generation call)"
        case "tool_started":
            return f"▶ {d.tool} {clip(d.target, TARGET_CHARS)}"
        case "tool_finished":
            return tool_finished(d)
        case "tool_uncertain":
            ack = "acknowledged" if d.acknowledged else "not acknowledged"
            return f"? {d.tool} {clip(d.target)}: outcome unknown ({d.cause}, {ack})"
        case "compaction":
            return f"compacted for {d.audience} through seq {d.through} → {d.checkpoint}"
        case "final":
            return f"\n{d.summary}\n"
        case "error":
            return f"error in {d.stage}: {d.error_class}: {d.message}"
        case "cleanup_warning":
            return f"warning: {d.error_class} {d.message}".rstrip()
    return None  # run_started, usage, unknown kinds


def tool_finished(d: Any) -> str:
    """The call's outcome and what it produced: the tool's own output (a diff for a write or
    an edit), not the text written for the model."""
    mark = "✓" if d.status == "ok" else "✗"
    code = "" if d.exit_code is None else f" exit {d.exit_code}"
    took = f" · {d.seconds:.1f} s" if getattr(d, "seconds", 0.0) >= 1.0 else ""
    shown = getattr(d, "display", "") or d.text
    is_diff = d.tool in ("write", "edit") and bool(getattr(d, "display", ""))
    limit = DIFF_LINES if is_diff else PREVIEW_LINES
    lines = shown.splitlines()
    body = [head(line, PREVIEW_CHARS) for line in lines[:limit]]
    if len(lines) > limit:
        body.append(f"… {len(lines) - limit} more lines (the session's artifacts hold all)")
    return "\n".join([f"  {mark} {d.tool} {d.status}{code}{took}", *("    " + b for b in body)])


def running(tool: str, seconds: float, progress: Any) -> list[str]:
    """The status block of a call still running: its time so far and its newest output."""
    top = f"  … {tool} running {seconds:.0f} s"
    if progress is None:
        return [top]
    size = progress.output_bytes
    amount = f"{size} bytes" if size < 10_000 else f"{size / 1000:.0f} kB"
    lines = [line for line in progress.tail.split("\n") if line.strip()]
    return [f"{top} · {progress.output_lines} lines, {amount}", *("    │ " + t for t in lines)]


def closing(
    data: dict[str, Any], home: str | None, home_args: list[str], interrupted: bool
) -> list[str]:
    """The run's last lines: its status and where its session is kept, then the next command
    that will work (copyable: `--sessions-dir` is in it when the sessions are not in the
    default place; `--ack-interrupted` after a call whose outcome is unknown, cancelled too)."""
    sid, status = data["session_id"], data.get("status")
    kept = f" · kept in {home}" if home else ""
    jmp = shlex.join(["jmp", *home_args, "--session", sid])
    summary = str(data.get("summary") or "")
    if (status == "blocked" and (interrupted or "--ack-interrupted" in summary)) or (
        status == "cancelled" and interrupted  # a stopped command: the next open is blocked
    ):
        step = f"check what the interrupted call did, then: {jmp} --ack-interrupted"
    else:
        step = {
            "completed": f"follow up: {jmp} 'your next request'",
            "compacted": f"continue: {jmp} 'your next request'",
            "needs_input": f"answer: {jmp} 'your answer'",
            "blocked": f"retry: {jmp}   or say what to do: {jmp} 'new instructions'",
            "cancelled": f"resume: {jmp}",
            "error": f"retry with: {jmp}",
        }.get(str(status), f"see: {jmp}")
    return [f"[{status}] session {sid}{kept}", f"  {step}"]


def clip(text: str, chars: int = PREVIEW_CHARS) -> str:
    """One line of at most `chars` characters, `…` where it was cut."""
    one = " ".join(str(text).split())
    return one if len(one) <= chars else one[: chars - 1] + "…"


def fit(line: str, columns: int) -> str:
    """`line` cut to at most `columns` terminal columns (a wide character takes two), with no
    cut word shown (protocol/text.py `head`): a status line never wraps."""
    used = 0
    for n, char in enumerate(line):
        used += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        if used > columns:
            return head(line, max(n - 1, 0)) + "…"
    return line
