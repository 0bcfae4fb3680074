"""The turn's `plan`: the steps jmp has taken in this turn and the one it is taking.

jmp routes one step at a time and knows no future step, so a plan entry is never `pending`:
every entry is a step the log recorded (choosing the next step, the completion review, writing
or building a call's arguments, the call itself, writing the answer), `completed` once the next
one began, the last `in_progress` until the turn ends. A turn that ends cancelled or failed drops
the step it was in (it did not complete; ACP has no "failed" entry). Every update carries the
whole list, as the schema asks; a long turn keeps its last MAX_ENTRIES steps. Built from
persisted events only; a loaded session replays no plan (no turn is running).
"""

from __future__ import annotations

from typing import Literal

from acp import plan_entry, update_plan
from acp.schema import AgentPlanUpdate, PlanEntry

from protocol.events import (
    ApprovalData,
    ArgumentOffloadData,
    CompletionReviewData,
    Data,
    FinalData,
    ModelStartedData,
    RouteData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

MAX_ENTRIES = 30
# Required by the schema; jmp's steps have no priority among them.
PRIORITY: Literal["medium"] = "medium"
STARTED = {
    "route": "Choose the next step",
    "completion_review": "Review whether the request is complete",
    "respond": "Write the answer",
}


class TurnPlan:
    """One session's plan of the running turn (see the module docstring)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, bool]] = []  # (content, done)
        self.routed = ""

    def feed(self, data: Data, title: str = "") -> AgentPlanUpdate | None:
        """The plan after this event, or None when the event changes nothing."""
        if isinstance(data, UserData):
            self.entries, self.routed = [], ""
            return None
        if isinstance(data, ModelStartedData):
            return self._step(self._started(data.stage))
        if isinstance(data, RouteData) and data.question == "route":
            self.routed = data.choice
            return self._done(f"Choose the next step: {data.choice} ({data.confidence:.2f})")
        if isinstance(data, CompletionReviewData):
            verdict = data.choice.replace("_", " ")
            return self._done(f"Review: {verdict} ({data.confidence:.2f})")
        if isinstance(data, ArgumentOffloadData):
            return self._step(f"Build the arguments for {data.tool} in code", done=True)
        if isinstance(data, ToolStartedData):
            return self._step(title or data.tool)
        if isinstance(data, ToolFinishedData | ToolUncertainData):
            return self._done()
        if isinstance(data, ApprovalData) and data.decision != "allowed":
            return self._step(f"{title or data.tool} (not run: {data.decision})", done=True)
        if isinstance(data, FinalData):
            return self._end(data.status)
        return None

    def _started(self, stage: str) -> str:
        if stage == "generate":
            return f"Write the arguments for {self.routed or 'the next call'}"
        if stage == "respond" and self.routed == "ask":
            return "Write a question for you"
        return STARTED.get(stage, stage)

    def _step(self, content: str, done: bool = False) -> AgentPlanUpdate:
        self.entries = [(text, True) for text, _ in self.entries]  # steps are sequential
        self.entries.append((content, done))
        self.entries = self.entries[-MAX_ENTRIES:]
        return self._update()

    def _done(self, content: str | None = None) -> AgentPlanUpdate | None:
        if not self.entries:
            return None
        text, _ = self.entries[-1]
        self.entries[-1] = (content or text, True)
        return self._update()

    def _end(self, status: str) -> AgentPlanUpdate | None:
        if not self.entries:
            return None
        if status in ("cancelled", "error"):  # the step under way did not complete
            self.entries = [(text, done) for text, done in self.entries if done]
        else:
            self.entries = [(text, True) for text, _ in self.entries]
        return self._update()

    def _update(self) -> AgentPlanUpdate:
        entries: list[PlanEntry] = [
            plan_entry(text, priority=PRIORITY, status="completed" if done else "in_progress")
            for text, done in self.entries
        ]
        return update_plan(entries)
