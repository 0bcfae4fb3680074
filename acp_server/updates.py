"""Session events as ACP session updates: live (one event at a time) and replayed (a whole log).

Pure functions over persisted, already redacted events: nothing here sees unvalidated
arguments or partial model output (`tool_started` is written after validation, `final` after
the answer is complete, and `model_progress` carries counts only and is never turned into an
update).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UserMessageChunk,
)

from protocol import catalog
from protocol.events import (
    Event,
    FinalData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

Update = AgentMessageChunk | UserMessageChunk | ToolCallStart | ToolCallProgress
ReadArtifact = Callable[[str], str]

TITLE_CHARS = 120
# Statuses whose summary is the agent's message: the answer, the question, the reason, the
# error. A cancelled turn says so through its stop reason; a compaction is not a turn.
SPOKEN = ("completed", "needs_input", "blocked", "error")


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
    """A readable one-line title: "Edit src/app.py", "Run pytest -q", "MCP echo hi"."""
    shown = _relative(target, workspace) if is_file_tool(tool) else target
    if tool.startswith("mcp."):
        verb = f"MCP {tool[4:]}"
    else:
        verb = "Run" if catalog.is_shell(tool) else tool.capitalize()
    return _clip(f"{verb} {_clip(shown)}".strip())


def started(data: ToolStartedData, workspace: Path) -> ToolCallStart:
    """`tool_started` -> a `tool_call` in progress, with the file as location for file tools."""
    return start_tool_call(
        data.call_id,
        title(data.tool, data.target, workspace),
        kind=tool_kind(data.tool),
        status="in_progress",
        locations=_locations(data.tool, data.target, workspace),
    )


def finished(data: ToolFinishedData, request: dict[str, Any] | None) -> ToolCallProgress:
    """`tool_finished` -> completed or failed, the output preview as text, a diff for edits."""
    text = data.text or data.error or "(no output)"
    if data.exit_code is not None and catalog.is_shell(data.tool):
        text = f"{text}\n[exit code {data.exit_code}]"
    content: list[Any] = [tool_content(text_block(text))]
    if data.status == "ok" and request is not None:
        content.extend(_diff(data.tool, request))
    return update_tool_call(
        data.call_id,
        status="completed" if data.status == "ok" else "failed",
        content=content,
    )


def uncertain(data: ToolUncertainData) -> ToolCallProgress:
    """`tool_uncertain` -> failed, saying that the outcome is unknown and nothing re-ran it."""
    return update_tool_call(
        data.call_id, status="failed", content=[tool_content(text_block(uncertain_text(data)))]
    )


def uncertain_text(data: ToolUncertainData) -> str:
    state = "acknowledged" if data.acknowledged else "not acknowledged yet"
    if data.cause == "kernel_exit":
        cause = "jmp itself was stopped"
    else:
        cause = "an MCP server died" if data.mcp_server else "the tool worker died"
    return f"Outcome unknown: {cause} during this call ({state}). {data.note}"


def message(data: FinalData) -> AgentMessageChunk | None:
    """The turn's message: the answer, the question, the blocking reason or the error."""
    if data.status not in SPOKEN or not data.summary:
        return None
    return update_agent_message_text(data.summary)


class Translator:
    """One session's events as updates. Remembers which calls the client has seen, so that an
    end whose start the client never saw arrives as a whole (failed) `tool_call`."""

    def __init__(self, workspace: Path, read_artifact: ReadArtifact | None = None) -> None:
        self.workspace = workspace
        self.read_artifact = read_artifact
        self._started: dict[str, ToolStartedData] = {}
        self._announced: set[str] = set()

    def live(self, event: Event) -> list[Update]:
        """The updates one live event becomes (none for routing, usage, progress, ...)."""
        data = event.data
        if isinstance(data, ToolStartedData):
            self._started[data.call_id] = data
            self._announced.add(data.call_id)
            return [started(data, self.workspace)]
        if isinstance(data, ToolFinishedData):
            update = finished(data, self._request(data.call_id))
            return self._end(data.call_id, update, data.tool, data.target)
        if isinstance(data, ToolUncertainData):
            return self._end(data.call_id, uncertain(data), data.tool, data.target)
        if isinstance(data, FinalData):
            spoken = message(data)
            return [spoken] if spoken is not None else []
        return []

    def replay(self, events: Sequence[Event]) -> Iterator[Update]:
        """A whole history in log order: user messages, each tool call followed by its final
        update, final messages. A call with no recorded end is replayed as outcome unknown."""
        ends = _last_ends(events)
        for event in events:
            data = event.data
            if isinstance(data, UserData):
                yield update_user_message_text(data.text)
            elif isinstance(data, ToolStartedData):
                self._started[data.call_id] = data
                self._announced.add(data.call_id)
                yield started(data, self.workspace)
                end = ends.get(data.call_id)
                if isinstance(end, ToolFinishedData):
                    yield finished(end, self._request(data.call_id))
                elif isinstance(end, ToolUncertainData):
                    yield uncertain(end)
                else:
                    text = tool_content(text_block(PENDING_TEXT))
                    yield update_tool_call(data.call_id, status="failed", content=[text])
            elif isinstance(data, FinalData):
                spoken = message(data)
                if spoken is not None:
                    yield spoken

    def _end(self, call_id: str, update: ToolCallProgress, tool: str, target: str) -> list[Update]:
        if call_id in self._announced:
            return [update]
        # The client never saw this call start (e.g. acknowledged in a fresh process before
        # any load): send it whole rather than an update for an unknown id.
        self._announced.add(call_id)
        return [
            start_tool_call(
                call_id,
                title(tool, target, self.workspace),
                kind=tool_kind(tool),
                status=update.status,
                content=update.content,
                locations=_locations(tool, target, self.workspace),
            )
        ]

    def _request(self, call_id: str) -> dict[str, Any] | None:
        """The call's validated request artifact, or None (a missing one costs only a diff)."""
        begun = self._started.get(call_id)
        if begun is None or self.read_artifact is None or not begun.request:
            return None
        try:
            loaded = json.loads(self.read_artifact(begun.request))
        except Exception:
            return None
        return loaded if isinstance(loaded, dict) else None


PENDING_TEXT = (
    "Outcome unknown: this call started and has no recorded end (jmp was stopped during it). "
    "Nothing re-ran it; the next prompt asks whether to acknowledge it."
)


def _last_ends(events: Sequence[Event]) -> dict[str, ToolFinishedData | ToolUncertainData]:
    """The last end record per call: a later tool_uncertain (acknowledged) wins."""
    ends: dict[str, ToolFinishedData | ToolUncertainData] = {}
    for event in events:
        data = event.data
        if isinstance(data, ToolFinishedData):
            ends[data.call_id] = data
        elif isinstance(data, ToolUncertainData):
            previous = ends.get(data.call_id)
            if not (isinstance(previous, ToolFinishedData) and previous.exit_code != -1):
                ends[data.call_id] = data
    return ends


def _diff(tool: str, request: dict[str, Any]) -> list[Any]:
    """A diff from the validated arguments of a write (new file text) or a str_replace edit."""
    args = request.get("arguments") or {}
    path = str(request.get("target") or args.get("path") or "")
    if catalog.effect_of(tool) != "writes_target" or not path or not isinstance(args, dict):
        return []
    if isinstance(args.get("file_text"), str):  # a new file's whole text
        return [tool_diff_content(path, args["file_text"])]
    old, new = args.get("old_str"), args.get("new_str")
    if args.get("command") == "str_replace" and isinstance(old, str) and isinstance(new, str):
        return [tool_diff_content(path, new, old)]
    return []


def _locations(tool: str, target: str, workspace: Path) -> list[ToolCallLocation] | None:
    if not is_file_tool(tool) or not target:
        return None
    path = Path(target)
    return [ToolCallLocation(path=str(path if path.is_absolute() else workspace / path))]


def _relative(target: str, workspace: Path) -> str:
    try:
        return str(Path(target).relative_to(workspace))
    except ValueError:
        return target


def _clip(text: str) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= TITLE_CHARS else one[: TITLE_CHARS - 1] + "…"
