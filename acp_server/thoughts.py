"""What the agent is doing between calls, as `agent_thought_chunk` lines.

One short line per step the log records: asking Jev for the next step and its choice, the
completion review and its verdict, the arguments being written (or built in code), the answer
being written. Derived from persisted events only (model_started, route, completion_review,
argument_offload), so a replayed history says what the live one said. No `plan` updates: jmp
routes one step at a time and keeps no plan, and a plan it does not have would be a claim.
"""

from __future__ import annotations

from protocol.events import (
    ArgumentOffloadData,
    CompletionReviewData,
    Data,
    ModelStartedData,
    RouteData,
)

NEXT = {"done": "done (the completion review checks it)", "ask": "ask you a question"}


class Thoughts:
    """The thought line of each event, given what was routed before (per session)."""

    def __init__(self) -> None:
        self.routed = ""  # the last route's choice: what the arguments or the answer are for

    def line(self, data: Data) -> str | None:
        if isinstance(data, ModelStartedData):
            return self._started(data.stage)
        if isinstance(data, RouteData) and data.question == "route":
            self.routed = data.choice
            shown = NEXT.get(data.choice, data.choice)
            return f"Next: {shown} (confidence {data.confidence:.2f}).\n"
        if isinstance(data, CompletionReviewData):
            verdict = data.choice.replace("_", " ")
            return f"Review: {verdict} (confidence {data.confidence:.2f}).\n"
        if isinstance(data, ArgumentOffloadData):
            return f"The arguments for {data.tool} are fixed by its schema: built in code.\n"
        return None

    def _started(self, stage: str) -> str | None:
        if stage == "route":
            return "Choosing the next step…\n"
        if stage == "completion_review":
            return "Reviewing whether the request is complete…\n"
        if stage == "generate":
            return f"Writing the arguments for {self.routed or 'the next call'}…\n"
        if stage == "respond":
            asking = self.routed == "ask"
            return "Writing a question for you…\n" if asking else "Writing the answer…\n"
        return None
