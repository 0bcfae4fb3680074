"""Session events as ACP session updates: the shape of each tool call and message.

Pure functions over persisted, already redacted events and the validated request artifact:
nothing here sees unvalidated arguments or a partial answer (`tool_started` is written after
validation, `final` after the answer is complete; the streamed answer is acp_server/stream.py's).
The per-session state (which calls the client has seen, the stream) is acp_server/translator.py.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import stat
from pathlib import Path
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    SessionInfoUpdate,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)

from kernel.loop.resume import ACK_HINT
from protocol import catalog
from protocol.events import (
    ApprovalData,
    FinalData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
)

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | UsageUpdate
    | SessionInfoUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
)
Request = dict[str, Any]  # a call's validated request artifact: {tool, arguments, target}

TITLE_CHARS = 120
FIND_LINE_BYTES = 4 * 1024 * 1024  # a str_replace's line is looked for in files up to this
# Statuses whose summary is the agent's message: the answer, the question, the reason, the
# error. A cancelled turn says so through its stop reason; a compaction is not a turn.
SPOKEN = ("completed", "needs_input", "blocked", "error")
# The CLI's flag in a blocked summary (kernel/loop/resume.py ACK_HINT), said as an editor does it.
EDITOR_ACK = "send your next prompt and choose “Acknowledge” when asked"
STOPPED = {
    "cancelled": "you cancelled it",
    "timeout": "it reached its time limit",
    "output_cap": "it reached the output cap",
}


def tool_kind(tool: str) -> ToolKind:
    """The ACP kind of a jmp tool, from its entry in the catalog (protocol/catalog.py): the
    shell `execute`, a writer `edit`, a file view `read`, another observer `search`; MCP tools
    and anything unknown are `other`."""
    known = catalog.BUILTINS.get(tool)
    if known is None:
        return "other"
    if known.shell:
        return "execute"
    if known.effect == "writes_target":
        return "edit"
    return "read" if known.snapshot else "search"


def is_file_tool(tool: str) -> bool:
    """True when the tool's target is a file: a view of it, or the file it writes."""
    return catalog.is_snapshot(tool) or catalog.effect_of(tool) == "writes_target"


def title(tool: str, target: str, workspace: Path) -> str:
    """A readable one-line title: "Edit src/app.py", "Run pytest -q", "MCP glossary: lookup"
    (an MCP call's target is its server)."""
    if tool.startswith("mcp."):
        return _clip(f"MCP {target}: {tool[4:]}" if target else f"MCP {tool[4:]}")
    shown = _relative(target, workspace) if is_file_tool(tool) else target
    verb = "Run" if catalog.is_shell(tool) else tool.capitalize()
    return _clip(f"{verb} {_clip(shown)}".strip())


def started(data: ToolStartedData, workspace: Path, request: Request | None) -> ToolCallStart:
    """`tool_started` -> a `tool_call` in progress, with the file (and line) as location."""
    return start_tool_call(
        data.call_id,
        title(data.tool, data.target, workspace),
        kind=tool_kind(data.tool),
        status="in_progress",
        locations=locations(data.tool, data.target, workspace, request),
    )


def proposed(
    call_id: str, tool: str, target: str, arguments: dict[str, Any], workspace: Path
) -> ToolCallStart:
    """A call waiting for the person's answer (ACP `ask` mode): `pending`, with what it would
    do (the diff of a write or edit, the command), before anything started."""
    request = {"tool": tool, "arguments": arguments, "target": target}
    content: list[Any] = diff(tool, request) or [tool_content(text_block(target or tool))]
    return start_tool_call(
        call_id,
        title(tool, target, workspace),
        kind=tool_kind(tool),
        status="pending",
        content=content,
        locations=locations(tool, target, workspace, request),
        raw_input=arguments,
    )


def finished(data: ToolFinishedData, request: Request | None) -> ToolCallProgress:
    """`tool_finished` -> completed or failed, the output preview as text, a diff for edits.
    A shell command says its exit code once: how it was stopped, if it was, instead."""
    # What a person is shown (a command's output without the notes for the model, the text a
    # read returned); a writer's change is its diff, below.
    shown = data.display if data.display and catalog.effect_of(data.tool) != "writes_target" else ""
    text = shown or data.text or data.error or "(no output)"
    if catalog.is_shell(data.tool):
        if data.interrupted:
            why = STOPPED.get(data.reason, "it was stopped")
            text = f"{text}\n[stopped before it finished: {why}; it has no exit code]"
        elif data.exit_code == -1:
            text = f"{text}\n[still running when recorded: it has no exit code]"
        elif data.exit_code is not None:
            text = f"{text}\n[exit code {data.exit_code}]"
    content: list[Any] = [tool_content(text_block(text))]
    if data.status == "ok" and request is not None:
        content.extend(diff(data.tool, request))
    return update_tool_call(
        data.call_id,
        status="completed" if data.status == "ok" else "failed",
        content=content,
    )


def running(call_id: str, elapsed_s: float, shown: list[Any]) -> ToolCallProgress:
    """A call's heartbeat (`tool_progress`): what it showed so far, then how long it has run."""
    text = f"Still running: {elapsed_s:.0f} s so far."
    update = update_tool_call(
        call_id, status="in_progress", content=[*shown, tool_content(text_block(text))]
    )
    update.field_meta = {"jmp": {"elapsedS": elapsed_s}}
    return update


def when(time_s: float | None) -> str | None:
    """A record's time as ISO 8601 (UTC), as `session/list` gives `updatedAt`."""
    if not time_s:
        return None
    return datetime.datetime.fromtimestamp(time_s, datetime.UTC).isoformat()


def info(title: str | None, time_s: float | None) -> SessionInfoUpdate:
    """`session_info_update`: the title (when known) and the time of the last activity."""
    return SessionInfoUpdate(
        session_update="session_info_update", title=title or None, updated_at=when(time_s)
    )


def uncertain(data: ToolUncertainData) -> ToolCallProgress:
    """`tool_uncertain` -> failed, saying that the outcome is unknown and nothing re-ran it."""
    return update_tool_call(
        data.call_id, status="failed", content=[tool_content(text_block(uncertain_text(data)))]
    )


def uncertain_text(data: ToolUncertainData) -> str:
    """What made the outcome unknown, in the person's words: their own cancel, jmp stopping, or
    a worker (or MCP server) dying."""
    state = "acknowledged" if data.acknowledged else "not acknowledged yet"
    if data.cause == "cancelled":
        return (
            f"Outcome unknown: you cancelled this call before it finished ({state}); what it "
            f"did until then is unknown. {data.note}"
        )
    if data.cause == "kernel_exit":
        cause = "jmp itself was stopped"
    else:
        cause = "an MCP server died" if data.mcp_server else "the tool worker died"
    return f"Outcome unknown: {cause} during this call ({state}). {data.note}"


def refused(data: ApprovalData) -> ToolCallProgress:
    """A rejected (or cancelled) approval: the call never started."""
    why = "You rejected this call" if data.decision == "rejected" else "Cancelled while asked"
    text = f"{why}: it did not run, and jmp was told."
    return update_tool_call(data.call_id, status="failed", content=[tool_content(text_block(text))])


def said(data: FinalData) -> str:
    """The turn's message text ('' for none): the answer, the question, the blocking reason or
    the error, with the CLI's way to go on said as an editor does it."""
    if data.status not in SPOKEN or not data.summary:
        return ""
    return data.summary.replace(ACK_HINT, EDITOR_ACK)


def message(data: FinalData) -> AgentMessageChunk | None:
    text = said(data)
    return update_agent_message_text(text) if text else None


def diff(tool: str, request: Request) -> list[Any]:
    """A diff from the validated arguments: a write (new file text), a str_replace edit (old_str
    -> new_str), an insert (the new lines, added)."""
    args = request.get("arguments") or {}
    path = str(request.get("target") or args.get("path") or "")
    if catalog.effect_of(tool) != "writes_target" or not path or not isinstance(args, dict):
        return []
    if isinstance(args.get("file_text"), str):  # a new file's whole text
        return [tool_diff_content(path, args["file_text"])]
    old, new = args.get("old_str"), args.get("new_str")
    if args.get("command") == "str_replace" and isinstance(old, str) and isinstance(new, str):
        return [tool_diff_content(path, new, old)]
    if args.get("command") == "insert" and isinstance(new, str):
        return [tool_diff_content(path, new, "")]
    return []


def locations(
    tool: str, target: str, workspace: Path, request: Request | None = None
) -> list[ToolCallLocation] | None:
    """The file of a file tool, with its 1-based line where the arguments give one."""
    if not is_file_tool(tool) or not target:
        return None
    path = Path(target)
    path = path if path.is_absolute() else workspace / path
    args = (request or {}).get("arguments") or {}
    return [ToolCallLocation(path=str(path), line=_line(args, path))]


def _line(args: Any, path: Path) -> int | None:
    if not isinstance(args, dict):
        return None
    view = args.get("view_range")
    if isinstance(view, list) and view and isinstance(view[0], int) and view[0] > 0:
        return int(view[0])
    if args.get("command") == "insert" and isinstance(args.get("insert_line"), int):
        return max(1, int(args["insert_line"]) + 1)  # the first inserted line
    if "file_text" in args:
        return 1
    for text in (args.get("old_str"), args.get("new_str")):  # before the edit, then after
        if isinstance(text, str) and text:
            found = _find_line(path, text)
            if found is not None:
                return found
    return None


def _find_line(path: Path, text: str) -> int | None:
    """The line where text begins in a regular file (never a FIFO or a huge one), or None."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > FIND_LINE_BYTES:
                return None
            content = f.read().decode()
        at = content.find(text)
        return content.count("\n", 0, at) + 1 if at >= 0 else None
    return None


def _relative(target: str, workspace: Path) -> str:
    try:
        return str(Path(target).relative_to(workspace))
    except ValueError:
        return target


def _clip(text: str) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= TITLE_CHARS else one[: TITLE_CHARS - 1] + "…"
