"""The harness worker: holds one jev-harness task (script, toolkits, evidence store).

Runnable as `python -m workers.harness ENDPOINT`. It imports the task script from the bytes
whose sha256 the kernel named (so the code that runs is the code that was logged), builds the
task with the inputs, and answers the kernel by calling the task's driver API
(jev_harness/model.py). It never sees a model key: the kernel redacts what it sends and what
this worker returns, and an EvidenceTask's report is handed to the kernel for redaction before
it is written (`Operated.report`, then `WriteReport`). The one key it may hold is
CAMOFOX_ACCESS_KEY, handed to the task's Camofox providers only (never to the environment)
when the built task has one. Everything it holds dies with it: a killed harness worker's task
is not resumed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from jev_harness import limits
from jev_harness.check import failure
from protocol.harness import (
    CloseTask,
    DomainOffered,
    EntriesTaken,
    EntrySpec,
    KeysTaken,
    LoadTask,
    Observe,
    Observed,
    OfferDomain,
    Operate,
    Operated,
    OptionSpec,
    ProvideKeys,
    TakeEntries,
    TaskClosed,
    TaskLoaded,
    WriteReport,
)
from protocol.limits import ScriptLimits
from protocol.messages import Msg
from protocol.redact import redact
from workers.base import RequestFailed
from workers.harness.script import (
    camofox_providers,
    load_script,
    provide_keys,
    receipt_of,
    tool_info,
)


class HarnessHandler:
    """`handler(request, send, cancel) -> reply` for the harness worker; one task per worker."""

    def __init__(self) -> None:
        self.task: Any = None
        self.entries: list[tuple[Any, dict[str, Any]]] = []

    def __call__(self, request: Msg, send: Any, cancel: threading.Event) -> Msg:
        limits.busy.set()  # the CPU watchdog may interrupt the script's code now
        try:
            return self._answer(request)
        except BaseException as exc:
            limit = limits.named(exc)
            if limit:  # a MemoryError, EFBIG or the CPU budget: named, not a bare traceback
                raise RequestFailed("task", f"the task script hit {limit}") from None
            raise
        finally:
            limits.busy.clear()

    def _answer(self, request: Msg) -> Msg:
        if isinstance(request, LoadTask):
            return self.load(request)
        task = self.task
        if task is None:
            raise RequestFailed("bad_request", "no task loaded (LoadTask first)")
        match request:
            case TakeEntries():
                return self.take_entries(request.id)
            case Observe():
                return self.observe(request.id)
            case OfferDomain():
                return self.domain(request)
            case Operate():
                return self.operate(request)
            case WriteReport():
                return self.write_report(request)
            case ProvideKeys():
                return KeysTaken(reply_to=request.id, providers=provide_keys(task, request.keys))
            case CloseTask():
                return self.close(request.id)
        raise RequestFailed(
            "bad_request", f"the harness worker does not serve {type(request).__name__}"
        )

    def load(self, request: LoadTask) -> Msg:
        if self.task is not None:
            raise RequestFailed("bad_request", "a task is already loaded")
        from jev_harness.model import TaskScript
        from jev_harness.task import Task

        deadline = float(request.limits.get("timeout_s") or 0) or 120.0
        # Before the script's first byte, on whichever path this worker was started (cold, or
        # forked by the warm pool, whose environment is not the run's: the values come here).
        bounds = ScriptLimits.from_dict(request.resources)
        limits.apply(bounds, deadline, threading.current_thread(), hard=False)  # the browser
        try:
            module = load_script(request.script, request.sha256)
            workflow = getattr(module, "workflow", None)
            if not isinstance(workflow, TaskScript):
                raise RequestFailed(
                    "task", f"{request.script} defines no `workflow = TaskScript(build)`"
                )
            task = workflow.build(dict(request.inputs))
            if not isinstance(task, Task):
                raise RequestFailed(
                    "task", f"build(inputs) returned {type(task).__name__}, not a Task"
                )
            # The token formats only: the known secrets stay in the kernel, which redacts what
            # this worker returns and the report before it is written (driver_redacts).
            task.configure(request.goal, request.limits, redact=redact)
            if hasattr(task, "driver_redacts"):
                task.driver_redacts = True
        except RequestFailed:
            raise
        except BaseException as exc:  # the script's own failure, named with its traceback
            raise RequestFailed("task", f"the task script failed: {failure(exc)}") from None
        self.task = task
        return TaskLoaded(
            reply_to=request.id,
            toolkits=[getattr(t, "name", type(t).__name__) for t in task.toolkits],
            tools=[tool_info(t) for t in task.tools.values()],
            labels=list(getattr(task, "labels", None) or []),
            output=str(getattr(task, "output", "") or ""),
            tool_selection=task.tool_selection,
            wants_keys=["CAMOFOX_ACCESS_KEY"] if camofox_providers(task) else [],
        )

    def take_entries(self, ident: str) -> Msg:
        self.entries = list(self.task.entry_operations())
        specs = [
            EntrySpec(tool=tool.name, parameters={k: o.id for k, o in chosen.items()})
            for tool, chosen in self.entries
        ]
        return EntriesTaken(reply_to=ident, operations=specs)

    def observe(self, ident: str) -> Msg:
        task = self.task
        return Observed(
            reply_to=ident,
            observation=task.observe(),
            offered=[tool_info(t) for t in task.offered_tools()],
            state_ref=task.state_ref(),
            complete=bool(task.complete()),
            receipt=receipt_of(task),
        )

    def domain(self, request: OfferDomain) -> Msg:
        from jev_harness.model import OfferError

        try:
            parents = self._parents(request.tool, request.parents)
            options = self.task.domain(request.tool, request.parameter, parents)
        except OfferError as exc:
            raise RequestFailed(exc.code, exc.detail) from None
        return DomainOffered(
            reply_to=request.id,
            options=[OptionSpec(id=o.id, description=o.description) for o in options],
        )

    def _parents(self, tool_name: str, ids: dict[str, str]) -> dict[str, Any]:
        """Chosen parent ids -> options, each checked against its fresh domain, in order."""
        from jev_harness.model import OfferError

        tool = self.task.tool(tool_name)
        chosen: dict[str, Any] = {}
        for param in tool.parameters:
            if param.name not in ids:
                break
            options = {o.id: o for o in self.task.domain(tool, param, chosen)}
            if ids[param.name] not in options:
                raise OfferError(
                    "unoffered", f"{ids[param.name]!r} is not offered for {tool.name}.{param.name}"
                )
            chosen[param.name] = options[ids[param.name]]
        unknown = set(ids) - set(chosen)
        if unknown:
            raise OfferError(
                "incomplete", f"{tool.name}: parents {sorted(unknown)} out of order or unknown"
            )
        return chosen

    def operate(self, request: Operate) -> Msg:
        from jev_harness.model import OfferError

        task = self.task
        try:
            if request.entry:
                tool, chosen = self._entry(request)
            else:
                tool, chosen = (
                    task.tool(request.tool),
                    task.resolve(request.tool, request.parameters),
                )
        except OfferError as exc:
            raise RequestFailed(exc.code, exc.detail) from None
        started = time.monotonic()
        outcome = task.operate(tool, chosen)
        pending = getattr(getattr(task, "saved", None), "pending", None)
        if pending is not None:  # nothing written yet: the kernel redacts it first
            return self._operated(request.id, tool, outcome, started, report=pending[0])
        return self._operated(request.id, tool, outcome, started)

    def write_report(self, request: WriteReport) -> Msg:
        """Write the report the last operation handed over, as the kernel redacted it."""
        task = self.task
        if getattr(getattr(task, "saved", None), "pending", None) is None:
            raise RequestFailed("bad_request", "no report was handed over")
        started = time.monotonic()
        outcome = task.write_pending_report(request.document)
        return self._operated(request.id, task.tool("save_report"), outcome, started)

    def _operated(
        self,
        ident: str,
        tool: Any,
        outcome: Any,
        started: float,
        report: dict[str, Any] | None = None,
    ) -> Operated:
        task = self.task
        seconds = time.monotonic() - started
        wrote = report is None and (outcome.receipt is not None or tool.effect == "write")
        receipt = receipt_of(task, outcome.receipt) if wrote else None
        return Operated(
            reply_to=ident,
            status=outcome.status,
            summary=outcome.summary,
            text=outcome.text,
            error=outcome.summary if outcome.status == "error" else "",
            source=outcome.source,
            target=outcome.target,
            data=dict(outcome.data),
            seconds=round(seconds, 6),
            complete=bool(task.complete()),
            receipt=receipt,
            report=report,
        )

    def _entry(self, request: Operate) -> tuple[Any, dict[str, Any]]:
        from jev_harness.model import OfferError

        if not self.entries or self.entries[0][0].name != request.tool:
            raise OfferError("unoffered", f"{request.tool} is not the next entry operation")
        return self.entries.pop(0)

    def close(self, ident: str) -> Msg:
        try:
            self.task.close()
        except Exception as exc:  # named in the final, never fatal
            return TaskClosed(reply_to=ident, problems=[f"{type(exc).__name__}: {exc}"])
        return TaskClosed(reply_to=ident)


def main() -> None:
    """`python -m workers.harness ENDPOINT`: serve until Shutdown or the kernel is gone."""
    sys.dont_write_bytecode = True  # a task run writes nothing but its report
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    from workers.base import main_for

    main_for("harness", lambda _argv: HarnessHandler())


if __name__ == "__main__":
    main()
