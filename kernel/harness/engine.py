"""One harness run inside an open session: decisions, operations, records, the final.

Every operation goes through the run's ledger (kernel/run/ledger.py), as an agent call does:
`tool_started` (fsynced) before the Operate message leaves, and `tool_finished` after; a harness
worker that dies in between leaves `tool_uncertain` (`worker_exit`) and the run `blocked`.
Nothing is ever re-run. Decisions are recorded as `route` (the tool question) and `parameter`
records before anything acts on them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from kernel.errors import JmpError
from kernel.harness.decisions import Decider
from kernel.harness.records import outcome, receipt_fields, record_receipt
from kernel.harness.state import build_state
from kernel.harness.workers import HarnessWorker
from kernel.run.ledger import Call, Ledger, RunEnded
from kernel.supervision.router import Router
from kernel.supervision.supervisor import Cancelled, WorkerDied, WorkerFailed
from protocol.events import ErrorData, RunStatus
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
        router: Router | None,
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
        self.ledger = Ledger(session)
        self.decider = Decider(session, router, self.remaining, self.cancel)

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
        target = ", ".join(f"{k}={v}" for k, v in chosen.items())
        call = self.ledger.open(tool.name, chosen, target)
        self.ledger.start(call)  # persist before effect: the Operate message is the effect
        if not entry:
            self.executed.add((tool.name, tuple(sorted(chosen.items()))))
        reply = self._operate(call, target, entry)
        self.steps += 0 if entry else 1
        self.ledger.finish(call, outcome(reply))
        if reply.receipt is not None:
            record_receipt(self.session, call.call_id, reply.receipt)
            self.receipt = reply.receipt
        return reply

    def _operate(self, call: Call, target: str, entry: bool) -> Operated:
        backstop = max(0.0, self.remaining()) + OPERATION_GRACE_S
        chosen = {name: str(value) for name, value in call.arguments.items()}
        try:
            return self.harness.operate(call.call_id, call.tool, chosen, backstop, entry)
        except WorkerDied as exc:
            self.ledger.uncertain(call, str(exc), signal=exc.signal, exit_code=exc.worker_exit_code)
            self.steps += 0 if entry else 1
            raise RunEnded(
                "blocked", f"uncertain call: {call.tool} ({call.call_id}) was interrupted: {exc}"
            ) from None
        except KeyboardInterrupt:  # a second Ctrl+C mid-call: stop the worker, settle the call
            self.harness.close()  # so no `final` is ever written over a pending call
            self.ledger.uncertain(call, "The operation was stopped by an interrupt")
            self.steps += 0 if entry else 1
            raise
        except (WorkerFailed, Cancelled) as exc:  # refused before it acted (e.g. unoffered)
            return Operated(reply_to=call.call_id, status="error", error=str(exc), target=target)

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
        self, status: RunStatus, summary: str, error: BaseException | None = None
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
        self.final = self.ledger.end(status, summary, artifact=self.artifact()).to_dict()
        return self.final

    def artifact(self) -> dict[str, Any] | None:
        if self.receipt is None:
            return None
        clean: dict[str, Any] = self.session.redactor.value(receipt_fields(self.receipt))
        return clean
