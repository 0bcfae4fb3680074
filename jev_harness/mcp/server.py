"""The MCP front end of one harness session: tool calls in, structured results out.

Calls are served one at a time: the SDK runs request handlers concurrently, so a call that
arrives while another is in flight is refused `busy` at once (never queued), before anything
else is looked at. The session's own work runs in a thread of its own, so the event loop keeps
answering (with `busy`) meanwhile; the call stays in flight until that thread ends, even when
the client has cancelled it or left.

Progress: a call of `operate` or `run_task` whose request carries a `progressToken` gets a
`notifications/progress` when it starts, after every operation of the run, and at least every
HEARTBEAT_S while it runs (the progress value is the seconds elapsed, which only grows; the
message says how many operations the budget has left). Cancellation (`notifications/cancelled`
for the call in flight): a delegated run stops between steps and is written `cancelled` (its
final), a call not yet begun does not begin; an operation already sent to the task runs to its
end and is recorded as usual (stopping it would leave it uncertain). Either way the session
stays consistent, and nothing more is sent for that request.

Every result carries `structuredContent` and the same JSON as text. A refusal has `isError`
true, `structuredContent.code` and the code as the first word of its text; its message is
fixed per code and never echoes what the caller sent. Nothing is written to the session log
for a refusal (the session checks before it acts).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server

from jev_harness.mcp import tools

HEARTBEAT_S = 10.0  # a long call reports progress at least this often
POLL_S = 0.25  # how often a long call's operations are counted
LONG = ("operate", "run_task")  # the calls that report progress

MESSAGES = {
    "busy": "another call is in flight; calls are served one at a time",
    "direct_only": "this server is direct-only: choose each operation with operate",
    "route_fixed": "direct operation and delegation cannot be mixed once one has executed",
    "stale_state": "state_ref is not the latest; call observe for the current one",
    "repeated_operation": "this tool already ran with these options",
    "incomplete": "give an option id for every parameter of the tool, and no other",
    "unoffered": "the tool or an option is not in the current offer; see observe and arguments",
    "unknown_tool": "no such tool; see tools/list",
    "cancelled": "the client cancelled this call",
}


class Front:
    """Serves one HarnessSession over MCP; `server()` builds the SDK server."""

    def __init__(
        self,
        session: Callable[[], Any],
        direct_only: bool,
        redact: Callable[[Any], Any],
        say: Callable[[str], None] = print,
        opened: Callable[[], Any] = lambda: None,
    ) -> None:
        self.session, self.say = session, say  # session() creates it at the first call
        self.opened = opened  # the session if it exists, without creating it
        self.direct_only = direct_only
        self.redact = redact
        self.in_flight = False
        self.idle = threading.Event()  # set while no call runs in a worker thread
        self.idle.set()
        self.calls = 0
        self.request_id: Any = None  # the request of the call in flight
        self.running = ""  # its tool (canonical name)
        self.cancelled = False  # the client cancelled the call in flight

    def describe(self, server: Server[Any, Any]) -> dict[str, Any]:
        """What server/discover (MCP 2026-07-28) answers: capabilities, instructions, name."""
        from mcp.server.lowlevel import NotificationOptions

        from kernel.config.install import version

        capabilities = server.get_capabilities(NotificationOptions(), {})
        return {
            "capabilities": capabilities.model_dump(by_alias=True, mode="json", exclude_none=True),
            "instructions": tools.instructions(self.direct_only),
            "serverInfo": {"name": "jev-harness", "version": version()},
        }

    def cancel(self, request_id: Any) -> None:
        """`notifications/cancelled` for `request_id`: stop the call in flight if it is that one."""
        if not self.in_flight or request_id != self.request_id:
            return  # unknown or already answered: ignored, as the spec allows
        self.cancelled = True
        session = self.opened()
        if session is not None and self.running == "run_task":
            session.engine.cancel.set()  # the delegated run stops between steps

    def server(self) -> Server[Any, Any]:
        from kernel.config.install import version

        server: Server[Any, Any] = Server(
            "jev-harness",
            version=version(),  # jmp's, not the MCP SDK's (the SDK's default)
            instructions=tools.instructions(self.direct_only),
        )

        @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return tools.listed(self.direct_only)

        @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
        async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
            context = server.request_context
            token = context.meta.progressToken if context.meta is not None else None
            progress = None
            if token is not None:

                async def progress(value: float, message: str) -> None:
                    await context.session.send_progress_notification(token, value, message=message)

            return await self.call(name, arguments, context.request_id, progress)

        return server

    async def call(
        self,
        name: str,
        arguments: Any,
        request_id: Any = None,
        progress: Callable[[float, str], Awaitable[None]] | None = None,
    ) -> types.CallToolResult:
        """One tool call; a second call while one is in flight is `busy`."""
        if self.in_flight:
            return rejection("busy")
        self.in_flight, self.cancelled = True, False
        self.request_id, self.running = request_id, tools.ALIASES.get(name, name)
        self.idle.clear()
        done = threading.Event()
        answer: list[types.CallToolResult] = []

        def work() -> None:
            try:
                answer.append(self.serve(name, arguments))
            finally:
                done.set()

        # Its own thread, so that it always runs to its end: a cancelled or abandoned call
        # stays in flight until then (the server's stop() settles one at shutdown).
        threading.Thread(target=work, name="jev-harness-mcp-call", daemon=True).start()
        async with anyio.create_task_group() as tg:
            if progress is not None and self.running in LONG:
                tg.start_soon(self._report, progress)
            await anyio.to_thread.run_sync(done.wait, abandon_on_cancel=True)
            tg.cancel_scope.cancel()
        return answer[0]

    async def _report(self, progress: Callable[[float, str], Awaitable[None]]) -> None:
        """Progress while the call runs: at its start, per operation, and every HEARTBEAT_S."""
        start = time.monotonic()
        sent_at, sent, counted = start, 0.0, None
        while True:
            session = self.opened()
            engine = session.engine if session is not None else None
            steps = engine.steps if engine is not None else 0
            now = time.monotonic()
            if steps != counted or now - sent_at >= HEARTBEAT_S:
                sent = max(round(now - start, 3), sent + 0.001)  # it must grow every time
                what = "delegated run" if self.running == "run_task" else "operation"
                message = f"{what} running for {now - start:.0f} s"
                if engine is not None:
                    message += f"; {steps} of {engine.limits.max_steps} operations taken"
                await progress(sent, message)
                sent_at, counted = now, steps
            await anyio.sleep(POLL_S)

    def serve(self, name: str, arguments: Any) -> types.CallToolResult:
        """Dispatch in the call's thread: check, run, shape the result."""
        try:
            return self._serve(name, arguments)
        finally:
            self.in_flight = False
            self.idle.set()

    def _serve(self, name: str, arguments: Any) -> types.CallToolResult:
        from kernel.errors import JmpError
        from kernel.harness.direct import HarnessRejected

        canonical = tools.ALIASES.get(name, name)
        if canonical not in tools.SCHEMAS:
            return rejection("unknown_tool")
        if canonical == "run_task" and self.direct_only:
            return rejection("direct_only")
        try:
            args = tools.check(canonical, arguments)
        except tools.BadArguments as exc:
            return rejection("invalid_arguments", str(exc))
        self.calls += 1
        try:
            session = self.session()
        except JmpError as exc:  # it could not be created, or the server is stopping
            return rejection("error", str(self.redact(str(exc))))
        if self.cancelled:  # before it began: it does not begin (nobody reads the answer)
            if canonical == "run_task":
                session.engine.cancel.set()
            return rejection("cancelled")
        try:
            result = self._dispatch(session, canonical, args)
        except HarnessRejected as exc:
            return rejection(exc.code, self._detail(session, exc, args))
        except JmpError as exc:  # the harness worker failed or is gone
            if canonical in ("observe", "arguments"):  # refused only with busy / stale_state
                return success(self.redact(self._without_worker(session, canonical, args, exc)))
            return rejection("error", str(self.redact(f"{type(exc).__name__}: {exc}")))
        except Exception as exc:  # a bug: named on stderr, never with what the caller sent
            self.say(f"internal error in {canonical}: {type(exc).__name__}")
            return rejection("error", f"internal error ({type(exc).__name__}); see the server log")
        return success(self.redact(result))

    def _dispatch(self, s: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "observe":
            result: dict[str, Any] = s.observe()
        elif name == "arguments":
            result = s.arguments(args["tool"], args["parents"], args["state_ref"])
        elif name == "operate":
            result = s.operate(args["tool"], args["parameters"], args["state_ref"])
        else:
            result = s.delegate()
        return result

    def _without_worker(
        self, session: Any, name: str, args: dict[str, Any], exc: Exception
    ) -> dict[str, Any]:
        """What observe / arguments can still say when the task cannot be asked: the end."""
        engine = session.engine
        note = f"the task cannot be observed: {type(exc).__name__}: {exc}"
        if name == "arguments":
            return {"tool": args["tool"], "state_ref": "", "parameter": None, "options": []}
        return {
            "state_ref": "",
            "session_id": session.session_id,
            "goal": engine.goal,
            "limits": engine.limits_view(),
            "observation": None,
            "tools": [],
            "complete": False,
            "delegation": {
                "available": False,
                "route": session.route,
                "direct_only": self.direct_only,
                "same_tools_and_verifier": True,
            },
            "artifact": engine.artifact(),
            "final": engine.final,
            "note": note,
        }

    def _detail(self, session: Any, exc: Any, args: dict[str, Any]) -> str:
        """A refusal's message: fixed per code, plus facts the server itself owns."""
        if exc.code == "budget_exhausted":
            return str(exc.detail)  # max steps / timeout / ended: the server's own words
        if exc.code == "incomplete":
            known = session.engine.tools.get(args.get("tool"))
            if known is not None:
                names = [p.name for p in known.parameters]
                return f"{MESSAGES['incomplete']} (this tool takes {names})"
        code = str(exc.code)
        return MESSAGES.get(code, code)


def success(structured: dict[str, Any]) -> types.CallToolResult:
    plain = json.loads(json.dumps(structured, ensure_ascii=False, default=str))
    text = json.dumps(plain, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=plain,
        isError=False,
    )


def rejection(code: str, detail: str | None = None) -> types.CallToolResult:
    """isError, structuredContent.code, and the code as the text's first word."""
    message = detail or MESSAGES.get(code, code)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{code} - {message}")],
        structuredContent={"code": code, "message": message},
        isError=True,
    )
