"""One session's events as ACP updates, live (one event at a time) and replayed (a whole log).

Remembers which calls the client has seen (an end whose start it never saw arrives as a whole
`tool_call`; a start it saw as `pending` while asked arrives as an update), what the thoughts
refer to, and the answer streamed so far, so that the recorded answer's `final` sends only the
rest of it.
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
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import ToolCallProgress

from acp_server.plan import TurnPlan
from acp_server.stream import AnswerStream, Redacts
from acp_server.thoughts import Thoughts
from acp_server.updates import (
    Request,
    Update,
    finished,
    info,
    locations,
    message,
    proposed,
    refused,
    running,
    said,
    started,
    title,
    tool_kind,
    uncertain,
)
from acp_server.usage import UsageMeter
from kernel.store.catalog import title_of
from protocol.events import (
    ApprovalData,
    Event,
    FinalData,
    ToolFinishedData,
    ToolProgressData,
    ToolStartedData,
    ToolUncertainData,
    UsageData,
    UserData,
)

ReadArtifact = Callable[[str], str]
PENDING_TEXT = (
    "Outcome unknown: this call started and has no recorded end (jmp was stopped during it). "
    "Nothing re-ran it; the next prompt asks whether to acknowledge it."
)
CUT_OFF = "\n\n(Cancelled: the answer above is incomplete, and it was not recorded.)"
USAGE_LOOKBACK = 1_000  # records an opened session's last Flash usage is looked for in
STARTED_OVER = "\n\n"  # the recorded answer does not continue what streamed: it follows whole


class Translator:
    """The updates of one session (see the module docstring)."""

    def __init__(
        self,
        workspace: Path,
        read_artifact: ReadArtifact | None = None,
        redactor: Redacts | None = None,
        context_size: int = 0,
    ) -> None:
        self.workspace = workspace
        self.read_artifact = read_artifact
        self.redactor = redactor
        self.stream: AnswerStream | None = None
        self.thoughts = Thoughts()
        self.plan = TurnPlan()
        self.usage = UsageMeter(context_size)
        self.title = ""  # the session's title (its first request), once known
        self._started: dict[str, ToolStartedData] = {}
        self._announced: set[str] = set()
        self._pending: set[str] = set()  # shown `pending` while the person was asked
        self._shown: dict[str, list[Any]] = {}  # the content a pending call was shown with

    # --- live -----------------------------------------------------------------------

    def live(self, event: Event) -> list[Update]:
        """The updates one live event becomes: the event's own (a thought, a call, a message),
        then the turn's plan, the usage and the session's info where it changed them."""
        data = event.data
        shown = self._own(data)
        called = getattr(data, "tool", "")
        named = title(called, getattr(data, "target", ""), self.workspace) if called else ""
        plan = self.plan.feed(data, named)
        if plan is not None:
            shown.append(plan)
        if isinstance(data, UsageData):
            usage = self.usage.feed(data)
            if usage is not None:
                shown.append(usage)
        if isinstance(data, UserData) and not self.title:
            self.title = title_of(data.text)
            shown.append(info(self.title, event.time))
        elif isinstance(data, FinalData):
            shown.append(info(self.title, event.time))
        return shown

    def _own(self, data: Any) -> list[Update]:
        thought = self.thoughts.line(data)
        if thought is not None:
            return [update_agent_thought_text(thought)]
        if isinstance(data, ToolStartedData):
            return [self._start(data)]
        if isinstance(data, ToolProgressData):
            if data.call_id not in self._announced:
                return []
            return [running(data.call_id, data.elapsed_s, self._shown.get(data.call_id, []))]
        if isinstance(data, ToolFinishedData):
            update = finished(data, self._request(data.call_id))
            return self._end(data.call_id, update, data.tool, data.target)
        if isinstance(data, ToolUncertainData):
            return self._end(data.call_id, uncertain(data), data.tool, data.target)
        if isinstance(data, ApprovalData) and data.decision != "allowed":
            self._pending.discard(data.call_id)
            return self._end(data.call_id, refused(data), data.tool, data.target)
        if isinstance(data, FinalData):
            return self._final(data)
        return []

    def known(self, events: Sequence[Event]) -> None:
        """The context an opened session's last Flash request held (its `usage`, looked for
        from the log's end in at most USAGE_LOOKBACK records; it decodes them, so it runs after
        the answer that opened the session, never while binding)."""
        for n, event in enumerate(reversed(events)):
            if n >= USAGE_LOOKBACK:
                break
            data = event.data
            if isinstance(data, UsageData) and data.provider != "typesafe":
                self.usage.held(data)
                break

    def asking(
        self, call_id: str, tool: str, target: str, arguments: dict[str, Any]
    ) -> list[Update]:
        """The `pending` tool call shown before its permission request."""
        self._announced.add(call_id)
        self._pending.add(call_id)
        shown = proposed(call_id, tool, target, arguments, self.workspace)
        self._shown[call_id] = list(shown.content or [])
        return [shown]

    def answer(self, offset: int, text: str) -> list[Update]:
        """A piece of the answer as it streams: what may be sent of it now."""
        if self.redactor is None:
            return []
        if self.stream is None:
            self.stream = AnswerStream(self.redactor)
        piece = self.stream.feed(offset, text)
        return [update_agent_message_text(piece)] if piece else []

    def _final(self, data: FinalData) -> list[Update]:
        """The recorded message, less what already streamed of it."""
        stream, self.stream = self.stream, None
        sent = stream.sent if stream is not None else ""
        text = said(data)
        if not sent:
            return [update_agent_message_text(text)] if text else []
        if data.status == "cancelled":
            return [update_agent_message_text(CUT_OFF)]
        rest = text[len(sent) :] if text.startswith(sent) else STARTED_OVER + text
        return [update_agent_message_text(rest)] if rest else []

    # --- replay ---------------------------------------------------------------------

    def replay(self, events: Sequence[Event]) -> Iterator[Update]:
        """A whole history in log order: user messages, thoughts, each tool call followed by
        its final update, final messages. A call with no recorded end is replayed as outcome
        unknown, one rejected before it started as rejected."""
        ends = _last_ends(events)
        for event in events:
            data = event.data
            thought = self.thoughts.line(data)
            if thought is not None:
                yield update_agent_thought_text(thought)
            elif isinstance(data, UserData):
                yield update_user_message_text(data.text)
            elif isinstance(data, ToolStartedData):
                yield self._start(data)
                end = ends.get(data.call_id)
                if isinstance(end, ToolFinishedData):
                    yield finished(end, self._request(data.call_id))
                elif isinstance(end, ToolUncertainData):
                    yield uncertain(end)
                else:
                    text = tool_content(text_block(PENDING_TEXT))
                    yield update_tool_call(data.call_id, status="failed", content=[text])
            elif isinstance(data, ApprovalData) and data.decision != "allowed":
                yield from self._end(data.call_id, refused(data), data.tool, data.target)
            elif isinstance(data, FinalData):
                spoken = message(data)
                if spoken is not None:
                    yield spoken

    # --- internals ------------------------------------------------------------------

    def _start(self, data: ToolStartedData) -> Update:
        self._started[data.call_id] = data
        self._announced.add(data.call_id)
        request = self._request(data.call_id)
        if data.call_id in self._pending:  # shown while asked: now it runs
            self._pending.discard(data.call_id)
            return update_tool_call(data.call_id, status="in_progress")
        return started(data, self.workspace, request)

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
                locations=locations(tool, target, self.workspace, self._request(call_id)),
            )
        ]

    def _request(self, call_id: str) -> Request | None:
        """The call's validated request artifact, or None (a missing one costs only a diff)."""
        begun = self._started.get(call_id)
        if begun is None or self.read_artifact is None or not begun.request:
            return None
        try:
            loaded = json.loads(self.read_artifact(begun.request))
        except Exception:
            return None
        return loaded if isinstance(loaded, dict) else None


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
