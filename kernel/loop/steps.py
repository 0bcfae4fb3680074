"""One tool step: offload or generate arguments, validate, persist before effect, run, record.

Persist before effect: the run's ledger (kernel/run/ledger.py) appends and fsyncs `tool_started`
before the request leaves for the tool worker; a front end that asks first
(kernel/loop/approval.py) has its answer recorded before that. A worker that dies during the
call gets `tool_uncertain` (worker_exit) and the run stops `blocked`, unless the tool only
observes (read): then the call ends failed (`reason` worker_exit) and the run goes on; a cancel
before the request left records that nothing ran; nothing is ever re-run by itself.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from kernel.config.settings import heartbeat_s
from kernel.errors import JmpError
from kernel.loop import approval, prompts
from kernel.loop.approval import Approve, ProposedCall
from kernel.loop.heartbeat import beating
from kernel.loop.kernel_tools import ToolHandle, kernel_tools
from kernel.loop.offload import fixed_arguments
from kernel.loop.repeats import repeated_error
from kernel.loop.resume import ACK_HINT
from kernel.run.ledger import ERROR_PREVIEW_CHARS, Call, Ledger, Outcome, RunEnded, preview
from kernel.store.pending import CANCELLED_WHY
from kernel.supervision.supervisor import Cancelled, NotSent, WorkerDied, WorkerFailed
from protocol.catalog import effect_of
from protocol.codec import to_builtins
from protocol.events import ArgumentOffloadData, ErrorData
from protocol.messages import Message, ToolResult, ToolSpec

if TYPE_CHECKING:
    from kernel.loop.context_view import ContextView
    from kernel.store.session import Session
    from kernel.supervision.models import Models
    from kernel.supervision.tools import Tools

NOT_RUN = "Cancelled before it started: nothing ran."


class ToolStep:
    """Executes the step the router chose; owns the MCP spec cache and the kernel tools."""

    def __init__(
        self,
        session: Session,
        models: Models,
        tools: Tools,
        view: ContextView,
        instructions: str,
        cancel: threading.Event,
        approve: Approve | None = None,
    ) -> None:
        self.session = session
        self.models = models
        self.tools = tools
        self.view = view
        self.instructions = instructions
        self.cancel = cancel
        self.ledger = Ledger(session)
        self.approve = approve
        self._mcp: list[ToolSpec] | None = None
        self._kernel_tools = kernel_tools(view.recall_index)
        self.heartbeat_s = heartbeat_s()

    def mcp_specs(self) -> list[ToolSpec]:
        """MCP tools, when servers are configured (waits for the tool worker once)."""
        if self._mcp is None:
            self._mcp = []
            if self.tools.servers:
                self._mcp = [s for s in self.tools.specs() if s.source != "builtin"]
                for name, reason in self.tools.failed_servers.items():
                    self.session.append(
                        ErrorData(
                            stage="tool", error_class="McpServerFailed", message=f"{name}: {reason}"
                        )
                    )
        return self._mcp

    def handle(self, tool: str) -> ToolHandle:
        """Who runs `tool`: the kernel itself (recall) or the tool worker."""
        return self._kernel_tools.get(tool, self.tools)

    def spec(self, tool: str) -> ToolSpec:
        for spec in self.handle(tool).specs():
            if spec.name == tool:
                return spec
        raise JmpError(f"the tool worker does not offer {tool!r}")

    # --- the step -------------------------------------------------------------------

    def run(self, tool: str) -> None:
        """Arguments, validation, then the call itself; returns to route again, or raises
        RunEnded when the step ends the run (blocked, cancelled, error)."""
        spec = self.spec(tool)
        arguments = self._arguments(spec)
        if arguments is None:
            self._after_error()
            return
        checked = self._validate(tool, arguments)
        if checked is None:
            self._after_error()
            return
        self._call(tool, *checked)

    def _arguments(self, spec: ToolSpec) -> dict[str, Any] | None:
        policy = self.models.settings.argument_offload
        fixed = fixed_arguments(dict(spec.parameters)) if policy == "deterministic" else None
        if fixed is not None:
            self.session.append(
                ArgumentOffloadData(
                    tool=spec.name,
                    policy=policy,
                    generator=self.models.settings.flash_model,
                    arguments=fixed,
                )
            )
            return fixed
        task = prompts.GENERATE_TASK.format(tool=spec.name)
        projection = self.view.project(
            "generator",
            len((self.instructions + task).encode()) + len(json.dumps(spec.parameters).encode()),
        )
        messages = [
            Message(role="system", content=self.instructions),
            Message(role="user", content=projection.text + "\n\n" + task),
        ]
        try:
            reply = self.models.generate("generate", messages, spec, cancel=self.cancel)
        except WorkerFailed as exc:
            self._generation_failed(spec.name, exc)
            return None
        except WorkerDied as exc:
            self._error("generate", type(exc).__name__, str(exc))
            raise RunEnded("error", f"The generator worker died: {exc}") from exc
        return dict(reply.arguments or {})

    def _generation_failed(self, tool: str, exc: WorkerFailed) -> None:
        if exc.code == "cancelled":
            raise Cancelled(str(exc)) from exc
        if exc.code == "invalid_arguments":
            self._error("generate", "InvalidArguments", f"{tool}: {exc.detail}")
            return
        self._error("generate", exc.error_class or type(exc).__name__, exc.detail)
        raise RunEnded("error", f"Generating arguments for {tool} failed: {exc.detail}") from exc

    def _validate(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
        try:
            validated = self.handle(tool).validate(tool, arguments)
        except WorkerFailed as exc:
            self._error("generate", "InvalidArguments", f"{tool}: {exc.detail}")
            return None
        return dict(validated.arguments), validated.target

    def _after_error(self) -> None:
        """An error goes back to the router, unless it is the third identical one in a row."""
        repeated = repeated_error(self.session.events)
        if repeated:
            raise RunEnded("blocked", f"The same error happened three times in a row: {repeated}")

    def _call(self, tool: str, arguments: dict[str, Any], target: str) -> None:
        """The call itself, recorded by the ledger: `tool_started` fsynced before it leaves."""
        call = self.ledger.open(tool, arguments, target)
        proposed = ProposedCall(call.call_id, tool, call.target, arguments)
        if not approval.asked(self.session, self.approve, self.cancel, proposed):
            self._after_error()  # rejected: routed again, unless it is the third in a row
            return
        self.ledger.start(call)
        result = self._execute(call)
        self.ledger.finish(
            call,
            Outcome(
                status=result.status,
                text=result.text,
                result=to_builtins(result),
                error=result.error,
                exit_code=result.exit_code,
                seconds=result.seconds,
                interrupted=result.interrupted,
                reason=result.reason,
                display=result.display,
            ),
        )
        if result.interrupted and result.reason in ("", "cancelled"):  # a limit is no cancel
            raise RunEnded("cancelled", f"Cancelled by the user while {tool} was running.")
        if result.status == "error":
            self._after_error()

    def _execute(self, call: Call) -> ToolResult:
        tool, target = call.tool, call.target
        try:
            with beating(self.session, call.call_id, tool, self.heartbeat_s):
                return self.handle(tool).run(
                    call.call_id, tool, dict(call.arguments), cancel=self.cancel
                )
        except NotSent:  # the cancel came before the request left: the call did nothing
            done = {"status": "error", "text": NOT_RUN}
            self.ledger.finish(
                call, Outcome(status="error", text=NOT_RUN, result=done, error=NOT_RUN)
            )
            raise
        except (Cancelled, WorkerDied) as exc:
            if effect_of(tool) == "observes":  # a read changed nothing: its end is a failure
                return self._observing_stopped(call, exc)
            if isinstance(exc, Cancelled):  # stopped while it ran; how far it got is unknown
                self.ledger.uncertain(call, CANCELLED_WHY, cause="cancelled")
                raise
            self.ledger.uncertain(call, str(exc), signal=exc.signal, exit_code=exc.worker_exit_code)
            raise RunEnded(
                "blocked",
                f"The tool worker died during {tool} {target!r}: its effect is unknown. Check it, "
                f"then {ACK_HINT}.",
            ) from exc
        except WorkerFailed as exc:
            if exc.code == "effect_unknown":  # an MCP server died mid-call: no end, no guess
                self.ledger.uncertain(call, exc.detail, mcp_server=True)
                raise RunEnded(
                    "blocked",
                    f"The MCP server died during {tool} {target!r}: its effect is unknown. Check "
                    f"it, then {ACK_HINT}.",
                ) from exc
            return ToolResult(
                reply_to=call.call_id, status="error", error=exc.detail, text=exc.detail
            )

    def _observing_stopped(self, call: Call, exc: Cancelled | WorkerDied) -> ToolResult:
        """The end of a call that observes only (read), stopped by a cancel or by its worker's
        death (killed, out of memory, past the file-tool limit): a failed call, never an
        uncertain one, for it had no effect (docs/DECISIONS.md "A read whose worker died")."""
        cancelled = isinstance(exc, Cancelled) or self.cancel.is_set()
        why = CANCELLED_WHY if cancelled else f"The tool worker died during {call.tool}: {exc}"
        text = f"{why}. {call.tool} changes nothing: nothing is uncertain, and nothing re-ran it."
        return ToolResult(
            reply_to=call.call_id,
            status="error",
            text=text,
            error=text,
            interrupted=True,
            reason="cancelled" if cancelled else "worker_exit",
        )

    def _error(self, stage: str, error_class: str, message: str) -> None:
        message = preview(self.session.redactor.text(message), ERROR_PREVIEW_CHARS, "")
        self.session.append(ErrorData(stage=stage, error_class=error_class, message=message))
