"""One harness run inside an open session: decisions, operations, records, the final.

Every operation is `tool_started` (fsynced) before the Operate message leaves, and
`tool_finished` after; a harness worker that dies in between leaves `tool_uncertain`
(`worker_exit`) and the run `blocked`. Nothing is ever re-run. Decisions are recorded as
`route` (the tool question) and `parameter` records before anything acts on them.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kernel.errors import JmpError
from kernel.harness.decisions import Decider
from kernel.harness.engine_errors import RunEnded
from kernel.harness.records import PREVIEW_CHARS, receipt_fields, record_finished, record_uncertain
from kernel.harness.state import build_state, encode
from kernel.harness.workers import HarnessWorker, Jev
from kernel.loop.steps import crash_point
from kernel.supervision.supervisor import Cancelled, WorkerDied, WorkerFailed
from protocol.events import ErrorData, FinalData, ToolStartedData
from protocol.harness import Observed, Operated, Receipt, TaskLoaded, ToolInfo

OPERATION_GRACE_S = 5.0  # past the run's deadline before an operation is stopped


@dataclass(frozen=True)
class Limits:
    max_steps: int = 20
    timeout_s: float = 120.0


class Engine:
    """Decides (through Jev or a caller) and operates, recording each step. One at a time."""

    def __init__(
        self,
        session: Any,
        harness: HarnessWorker,
        jev: Jev | None,
        goal: str,
        limits: Limits,
        loaded: TaskLoaded,
        cancel: threading.Event | None = None,
        started: float | None = None,
        context: Any = None,
    ) -> None:
        self.session, self.harness, self.goal, self.context = session, harness, goal, context
        self.limits, self.loaded = limits, loaded
        self.cancel = cancel or threading.Event()
        self.deadline = (started or time.monotonic()) + limits.timeout_s
        self.steps = 0
        self.executed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        self.receipt: Receipt | None = None
        self.final: dict[str, Any] | None = None
        self.entered = False
        self.tools = {t.name: t for t in loaded.tools}
        self.decider = Decider(session, jev, self.remaining, self.cancel)

    # --- state ----------------------------------------------------------------

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def limits_view(self) -> dict[str, Any]:
        return {
            "max_steps": self.limits.max_steps,
            "steps_taken": self.steps,
            "timeout_s": self.limits.timeout_s,
        }

    def observe(self) -> tuple[Observed, str, str]:
        """The task's observation, the request state built from it, and its state_ref."""
        observed = self.harness.observe()
        if observed.receipt is not None:
            self.receipt = observed.receipt
        state = build_state(self.goal, self.limits_view(), observed.observation, self.context)
        return observed, state, observed.state_ref

    def exhausted(self) -> str:
        """Why no further operation may run ("" when one may)."""
        if self.steps >= self.limits.max_steps:
            return f"max steps reached ({self.limits.max_steps} operations)"
        if self.remaining() <= 0:
            return f"timeout after {self.limits.timeout_s:g} s"
        return ""

    # --- delegation -----------------------------------------------------------

    def delegate(self) -> dict[str, Any]:
        """Jev runs the task to its end; the final is written; returns the result."""
        try:
            while True:
                self._step()
        except RunEnded as end:
            return self.finish(end.status, end.summary)
        except Cancelled:
            return self.finish("cancelled", "cancelled by the caller")
        except (WorkerFailed, WorkerDied, JmpError) as exc:
            return self.finish("error", f"{type(exc).__name__}: {exc}", error=exc)

    def materialize(self) -> None:
        """Run (and log) the toolkits' entry captures once; they count as no step."""
        if self.entered:
            return
        self.entered = True
        for entry in self.harness.take_entries():
            tool = self.tools.get(entry.tool) or ToolInfo(name=entry.tool)
            self.execute(tool, dict(entry.parameters), entry=True)

    def _step(self) -> None:
        self.materialize()
        if self.cancel.is_set():
            raise RunEnded("cancelled", "cancelled by the caller")
        observed, state, _ref = self.observe()
        if observed.complete:
            raise RunEnded("completed", self.completed_summary())
        if why := self.exhausted():
            raise RunEnded("blocked", why)
        if not observed.offered:
            raise RunEnded("blocked", "no offered operation: the task offers no tool now")
        tool = self.decider.tool(observed.offered, self.loaded.tool_selection, state)
        chosen = self._parameters(tool, state)
        reply = self.execute(tool, chosen)
        if reply.complete:
            raise RunEnded("completed", self.completed_summary())

    def _parameters(self, tool: ToolInfo, state: str) -> dict[str, str]:
        chosen: dict[str, str] = {}
        for parameter in tool.parameters:
            options = self.harness.domain(tool.name, parameter.name, dict(chosen))
            if not options:
                raise RunEnded(
                    "blocked", f"no offered operation: {tool.name}.{parameter.name} has no option"
                )
            chosen[parameter.name] = self.decider.parameter(tool, parameter, options, state)
        return chosen

    # --- operations -----------------------------------------------------------

    def execute(self, tool: ToolInfo, chosen: dict[str, str], entry: bool = False) -> Operated:
        """One operation, persisted before its effect. RunEnded("blocked") if uncertain.

        An entry capture is logged like any operation but does not count against max_steps.
        """
        call_id = uuid.uuid4().hex
        arguments = encode(chosen)
        request = self.session.artifacts.write_json(
            f"{call_id}.request.json", {"tool": tool.name, "parameters": chosen}
        )
        target = ", ".join(f"{k}={v}" for k, v in chosen.items())
        crash_point("before_tool_started")
        self.session.append(
            ToolStartedData(
                call_id=call_id,
                tool=tool.name,
                target=target,
                request=request,
                arguments=arguments[:PREVIEW_CHARS],
            ),
            durable=True,  # persist before effect: the Operate message is the effect
        )
        if not entry:
            self.executed.add((tool.name, tuple(sorted(chosen.items()))))
        crash_point("after_tool_started")
        reply = self._operate(call_id, tool, chosen, target, entry)
        crash_point("after_tool_result")
        self.steps += 0 if entry else 1
        if record_finished(self.session, call_id, tool.name, arguments, target, reply):
            self.receipt = reply.receipt
        return reply

    def _operate(
        self, call_id: str, tool: ToolInfo, chosen: dict[str, str], target: str, entry: bool
    ) -> Operated:
        backstop = max(0.0, self.remaining()) + OPERATION_GRACE_S
        try:
            return self.harness.operate(call_id, tool.name, chosen, backstop, entry)
        except WorkerDied as exc:
            why, signal, code = str(exc), exc.signal, exc.worker_exit_code
            record_uncertain(self.session, call_id, tool.name, target, why, signal, code)
            self.steps += 0 if entry else 1
            raise RunEnded(
                "blocked", f"uncertain call: {tool.name} ({call_id}) was interrupted: {exc}"
            ) from None
        except KeyboardInterrupt:  # a second Ctrl+C mid-call: stop the worker, settle the call
            self.harness.close()  # so no `final` is ever written over a pending call
            why = "stopped by an interrupt"
            record_uncertain(self.session, call_id, tool.name, target, why, None, None)
            self.steps += 0 if entry else 1
            raise
        except (WorkerFailed, Cancelled) as exc:  # refused before it acted (e.g. unoffered)
            return Operated(reply_to=call_id, status="error", error=str(exc), target=target)

    # --- the end --------------------------------------------------------------

    def completed_summary(self) -> str:
        r = self.receipt
        if r is None:
            return "the task's completion check passed"
        return (
            f"{r.record_count} records saved to {r.path} (receipt match "
            f"{str(r.match).lower()}, verifier {str(r.verdict).lower()})"
        )

    def finish(
        self, status: str, summary: str, error: BaseException | None = None
    ) -> dict[str, Any]:
        """Close the toolkits, write `final` (once), return the result."""
        if self.final is not None:
            return self.final
        if error is not None or status == "error":
            self.session.append(
                ErrorData(
                    stage="route",
                    error_class=type(error).__name__ if error is not None else "RunEnded",
                    message=str(error) if error is not None else summary,
                )
            )
        problems = self.harness.close_task()
        if problems:
            summary += " (closing toolkits: " + "; ".join(problems) + ")"
        self.session.append(FinalData(status=status, summary=summary))  # type: ignore[arg-type]
        self.final = {
            "session_id": self.session.id,
            "status": status,
            "summary": self.session.redactor.text(summary),
            "session_dir": str(self.session.directory),
            "artifact": self.artifact(),
        }
        return self.final

    def artifact(self) -> dict[str, Any] | None:
        if self.receipt is None:
            return None
        clean: dict[str, Any] = self.session.redactor.value(receipt_fields(self.receipt))
        return clean
