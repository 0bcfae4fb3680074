"""Asking Jev: which step comes next (route) and whether a proposed `done` holds (review).

Each question is asked over the router's projection of the log and recorded (`route`,
`completion_review`) before its answer is used. A failed request, an answer that was not
offered, a router below its confidence floor and a state that cannot fit the budget end the
run (RunEnded) with an `error` record first where something failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernel.errors import ContextOverflow
from kernel.loop import prompts
from kernel.run.ledger import RunEnded
from kernel.supervision.supervisor import WorkerDied, WorkerFailed
from protocol.events import CompletionReviewData, ErrorData, RouteData, Stage
from protocol.messages import ToolSpec

if TYPE_CHECKING:
    from kernel.loop.context_view import ContextView
    from kernel.store.session import Session
    from kernel.supervision.models import Models


def record_error(session: Session, stage: str, exc: BaseException) -> None:
    """An `error` record for a failed stage, its message redacted."""
    error_class = getattr(exc, "error_class", "") or type(exc).__name__
    session.append(
        ErrorData(stage=stage, error_class=error_class, message=session.redactor.text(str(exc)))
    )


class Routing:
    """Jev's two questions for one agent; `mcp_specs` gives the MCP tools it may offer."""

    def __init__(
        self,
        session: Session,
        models: Models,
        view: ContextView,
        mcp_specs: Callable[[], list[ToolSpec]],
        cancel: threading.Event,
    ) -> None:
        self.session = session
        self.models = models
        self.view = view
        self.mcp_specs = mcp_specs
        self.cancel = cancel

    def route(self, exclude_done: bool) -> str:
        """The next label (a tool, `ask` or `done`), recorded as `route`."""
        options = self._options(exclude_done)
        routed, size = self._ask_jev("route", prompts.ROUTE_QUESTION, options)
        floor = self.models.settings.route_floor
        self.session.append(
            RouteData(
                choice=routed.choice,
                confidence=routed.confidence,
                context_bytes=size,
                probabilities=dict(routed.probabilities),
                offered=list(options),
                floor=floor,
                model=routed.usage.model,
            )
        )
        if routed.choice not in options:
            raise RunEnded("error", f"Jev chose {routed.choice!r}, which was not offered.")
        if routed.confidence < floor:
            ranked = sorted(routed.probabilities.items(), key=lambda kv: -kv[1])[:3]
            shown = ", ".join(f"{k} {v:.2f}" for k, v in ranked)
            raise RunEnded(
                "needs_input",
                f"Not sure what to do next (confidence {routed.confidence:.2f} is below the "
                f"floor {floor:.2f}; {shown}). Please clarify the request.",
            )
        return str(routed.choice)

    def review(self) -> str:
        """The completion review of a proposed `done`: complete, work_remains or blocked."""
        routed, size = self._ask_jev(
            "completion_review", prompts.REVIEW_QUESTION, dict(prompts.REVIEW_OPTIONS)
        )
        self.session.append(
            CompletionReviewData(
                choice=routed.choice,
                confidence=routed.confidence,
                context_bytes=size,
                probabilities=dict(routed.probabilities),
                model=routed.usage.model,
            )
        )
        return str(routed.choice)

    def _options(self, exclude_done: bool) -> dict[str, str]:
        mcp = {spec.name: spec.description or spec.name for spec in self.mcp_specs()}
        options = prompts.route_options(mcp)
        if exclude_done:
            del options["done"]
        return options

    def _state(self, reserved: int) -> tuple[str, int]:
        try:
            projection = self.view.project("router", reserved)
        except ContextOverflow as exc:
            record_error(self.session, "route", exc)
            raise RunEnded("blocked", str(exc)) from exc
        return projection.text, projection.bytes

    def _ask_jev(self, stage: Stage, question: str, options: dict[str, str]) -> Any:
        reserved = prompts.reserved_bytes(question, options)
        state, size = self._state(reserved)
        try:
            routed = self.models.route(stage, question, options, state, cancel=self.cancel)
        except (WorkerFailed, WorkerDied) as exc:
            record_error(self.session, stage, exc)
            raise RunEnded("error", f"The {stage} request failed: {exc}") from exc
        return routed, size
