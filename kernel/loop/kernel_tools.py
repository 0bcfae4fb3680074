"""Tools the kernel runs itself (`recall`), behind the call interface of the tool worker.

The step (kernel/loop/steps.py) takes a tool's handle and calls `specs`, `validate` and `run`
on it alike whether the tool worker or the kernel executes the call, so a call leaves the same
records either way (`tool_started` fsynced first). A kernel tool observes only: a kill during
one leaves it without an end, which the next open records as a failed call (it had no
effect: kernel/run/ledger.py `settle`), and nothing re-runs it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kernel.context.recall.search import RecallError
from kernel.context.recall.tool import RECALL_SCHEMA, recall_arguments, run_recall
from kernel.supervision.supervisor import WorkerFailed
from protocol.catalog import RECALL
from protocol.messages import ToolResult, ToolSpec, Validated

if TYPE_CHECKING:
    from kernel.context.recall.index import RecallIndex


class ToolHandle(Protocol):
    """What the step calls on a tool: the tool worker's `Tools` and each kernel tool."""

    def specs(self) -> list[ToolSpec]:
        """The tools this handle offers."""
        ...

    def validate(self, tool: str, args: dict[str, Any]) -> Validated:
        """Check arguments with no effect; raises WorkerFailed (invalid_arguments)."""
        ...

    def run(
        self,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Execute one call (recorded as started already)."""
        ...


class RecallTool:
    """`recall` over the session's own history; `index` gives the synced index, or None."""

    def __init__(self, index: Callable[[], RecallIndex | None]) -> None:
        self._index = index

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=RECALL.name, description=RECALL.description, parameters=RECALL_SCHEMA)
        ]

    def validate(self, tool: str, args: dict[str, Any]) -> Validated:
        try:
            recall_arguments(args)
        except RecallError as exc:
            raise WorkerFailed("invalid_arguments", str(exc)) from exc
        target = json.dumps(args, sort_keys=True, ensure_ascii=False)
        return Validated(reply_to="", arguments=dict(args), target=target)

    def run(
        self,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Never raises: an unusable index or bad arguments are a normal tool error."""
        index = self._index()
        try:
            if index is None:
                raise RecallError("the recall cache is unavailable")
            text = run_recall(index, args)
        except Exception as exc:  # an explicit recall error is a normal tool error
            return ToolResult(reply_to=call_id, status="error", error=str(exc), text=str(exc))
        return ToolResult(reply_to=call_id, status="ok", text=text)


def kernel_tools(index: Callable[[], RecallIndex | None]) -> dict[str, ToolHandle]:
    """The handles of the tools the kernel runs itself, by name (the catalog's non-worker
    tools); every other tool is the tool worker's."""
    return {RECALL.name: RecallTool(index)}
