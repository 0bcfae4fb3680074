"""The harness worker: holds one jev-harness task (script, toolkits, evidence store).

Runnable as `python -m workers.harness ENDPOINT`. It imports the task script from the bytes
whose sha256 the kernel named (so the code that runs is the code that was logged), builds the
task with the inputs, and answers the kernel by calling the task's driver API
(jev_harness/model.py). It never sees a model key. Everything it holds dies with it: a killed
harness worker's task is not resumed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
import time
import types
from typing import Any

from jev_harness.check import traceback_summary
from protocol.harness import (
    CloseTask,
    DomainOffered,
    EntriesTaken,
    EntrySpec,
    LoadTask,
    Observe,
    Observed,
    OfferDomain,
    Operate,
    Operated,
    OptionSpec,
    ParameterSpec,
    Receipt,
    TakeEntries,
    TaskClosed,
    TaskLoaded,
    ToolInfo,
)
from protocol.messages import Msg
from workers.base import RequestFailed
from workers.redact import redact

SCRIPT_MODULE = "jev_task_script"


def load_script(path: str, sha256: str) -> types.ModuleType:
    """Execute the script's bytes as a module, refusing bytes that do not hash to sha256."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang us
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RequestFailed("task", f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
    finally:
        os.close(fd)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise RequestFailed("task", f"{path} changed since it was logged (sha256 {digest})")
    module = types.ModuleType(SCRIPT_MODULE)
    module.__file__ = path
    sys.modules[SCRIPT_MODULE] = module  # dataclasses and pickling-free helpers look it up
    code = compile(data, path, "exec", dont_inherit=True)
    exec(code, module.__dict__)
    return module


def tool_info(tool: Any) -> ToolInfo:
    return ToolInfo(
        name=tool.name,
        description=tool.description,
        effect=tool.effect,
        parameters=[
            ParameterSpec(
                name=p.name,
                description=p.description,
                selection=p.selection,
                depends_on=list(p.depends_on),
            )
            for p in tool.parameters
        ],
    )


def receipt_of(task: Any, raw: dict[str, Any] | None = None) -> Receipt | None:
    """The task's artifact receipt with the verifier's verdict; None for a task without one."""
    raw = raw or task.receipt()
    if not raw:
        return None
    return Receipt(
        path=str(raw.get("path", "")),
        exists=bool(raw.get("exists", False)),
        match=bool(raw.get("match", False)),
        record_count=int(raw.get("record_count", 0)),
        digest=None if raw.get("digest") is None else str(raw["digest"]),
        sources=[str(s) for s in raw.get("sources", [])],
        verdict=bool(task.complete()),
    )


class HarnessHandler:
    """`handler(request, send, cancel) -> reply` for the harness worker; one task per worker."""

    def __init__(self) -> None:
        self.task: Any = None
        self.entries: list[tuple[Any, dict[str, Any]]] = []

    def __call__(self, request: Msg, send: Any, cancel: threading.Event) -> Msg:
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
            # The report is written here, so this is where it is redacted: the kernel's known
            # secrets (LoadTask.secrets) and the token formats every redactor knows.
            task.configure(request.goal, request.limits, redact=redact, secrets=request.secrets)
        except RequestFailed:
            raise
        except BaseException as exc:  # the script's own failure, named with its traceback
            raise RequestFailed(
                "task", f"the task script failed: {traceback_summary(exc)}"
            ) from None
        self.task = task
        return TaskLoaded(
            reply_to=request.id,
            toolkits=[getattr(t, "name", type(t).__name__) for t in task.toolkits],
            tools=[tool_info(t) for t in task.tools.values()],
            labels=list(getattr(task, "labels", None) or []),
            output=str(getattr(task, "output", "") or ""),
            tool_selection=task.tool_selection,
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
        seconds = time.monotonic() - started
        wrote = outcome.receipt is not None or tool.effect == "write"
        receipt = receipt_of(task, outcome.receipt) if wrote else None
        return Operated(
            reply_to=request.id,
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
