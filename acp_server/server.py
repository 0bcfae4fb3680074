"""The ACP agent: initialize, session/prompt and /cancel over the SDK's router, and the session
methods of acp_server/session_methods.py (new, load, resume, close, set_mode, list).

The event loop only routes messages; every kernel call runs in a worker thread, so the
connection stays responsive (a cancel arrives while a prompt runs). A run's events become
updates through a blocking send from its thread (sink.py): every update of a turn is written
before the turn's response, in log order. One prompt per session at a time; many sessions per
process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from acp import RequestError
from acp.interfaces import Client
from acp.schema import (
    InitializeResponse,
    PromptResponse,
)

from acp_server import hello, permission
from acp_server.config import WARM_SESSIONS
from acp_server.content import prompt_text
from acp_server.errors import JMP_ERROR, NOT_FOUND, as_request_error
from acp_server.session_methods import SessionMethods
from acp_server.sessions import Config, Handle
from acp_server.updates import Update
from kernel.store import pending
from kernel.store.redact import Redactor

T = TypeVar("T")


class JmpAcpAgent(SessionMethods):
    """jmp behind the ACP `Agent` interface (the SDK calls these with snake_case fields)."""

    def __init__(self, config: Config, version: str = "", warm: int = WARM_SESSIONS) -> None:
        self.config = config
        self.version = version
        self.warm = max(1, warm)
        self.handles: dict[str, Handle] = {}
        self._coolers: set[asyncio.Future[None]] = set()
        self.closed = False
        self.client: Client | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="acp-session")

    def on_connect(self, conn: Client) -> None:
        self.client = conn
        self.loop = asyncio.get_running_loop()

    # --- lifecycle ----------------------------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        """The answer acp_server/hello.py gives before the SDK is loaded, as a model."""
        return InitializeResponse.model_validate(hello.result(protocol_version, self.version))

    async def authenticate(self, method_id: str, **_: Any) -> None:
        reason = "jmp has no auth methods: its keys come from the environment"
        raise RequestError.invalid_params({"reason": reason})

    # --- prompts ------------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        """One turn: ask about uncertain calls, then one Agent.run in a thread."""
        handle = self._handle(session_id)
        text = prompt_text(prompt)
        await self._settled(handle)
        if handle.busy:
            raise RequestError(JMP_ERROR, f"session {session_id} already has a prompt running")
        # Taken and cleared with no await since the check: a `session/cancel` that arrives from
        # here on (even before the run has started) is this prompt's, and is kept.
        handle.busy = True
        handle.agent.cancel.clear()
        try:
            await self._call(lambda: self.config.settings().require_keys(), handle)
            acknowledge = False
            waiting = pending.unsettled(handle.session.events)
            if waiting:
                if handle.agent.cancel.is_set():
                    return PromptResponse(stop_reason="cancelled")  # nothing asked or recorded
                choice = await permission.ask(self, handle, waiting)
                if choice is None:
                    return PromptResponse(stop_reason="cancelled")
                acknowledge = choice
            result = await self._call(partial(handle.run, text, acknowledge), handle, run=True)
        finally:
            handle.busy = False
            handle.last_prompt = time.monotonic()
        cooler = asyncio.ensure_future(self._cool_others())  # after the response
        self._coolers.add(cooler)
        cooler.add_done_callback(self._coolers.discard)

        if result["status"] == "cancelled":
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Set the run's cancel Event; the prompt answers `cancelled` when the run stops."""
        handle = self.handles.get(session_id)
        if handle is not None:
            handle.agent.cancel.set()

    # --- plumbing -----------------------------------------------------------------------

    async def _cool_others(self) -> None:
        """Stop the workers of idle sessions beyond the `warm` most recently prompted.

        One session at a time, each chosen afresh after the last one's workers stopped: a prompt
        may have started meanwhile on a session the first look found idle, and a busy session
        is never cooled (choosing and marking it `cooling` happen with no await between, and a
        prompt waits for `cooling` to end before it takes the session).
        """
        while True:
            warm = sorted(
                (h for h in self.handles.values() if h.last_prompt and not h.busy),
                key=lambda h: h.last_prompt,
                reverse=True,
            )
            if len(warm) <= self.warm or self.closed:
                return
            handle = warm[-1]  # the least recently prompted
            handle.cooling = asyncio.ensure_future(self._call(handle.cool))
            try:
                await handle.cooling
            finally:
                handle.cooling = None

    @staticmethod
    async def _settled(handle: Handle) -> None:
        """Wait until the session's workers are no longer being stopped (if they are)."""
        while handle.cooling is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(handle.cooling)

    def _handle(self, session_id: str) -> Handle:
        handle = self.handles.get(session_id)
        if handle is None:
            raise RequestError(
                NOT_FOUND, f"session {session_id} is not open here: use session/new or session/load"
            )
        return handle

    async def _call(
        self,
        fn: Callable[[], T],
        handle: Handle | None = None,
        run: bool = False,
        redactor: Redactor | None = None,
    ) -> T:
        """fn in a worker thread; kernel errors become JSON-RPC errors with text redacted by
        `redactor`, else the handle's session's, else the process's. `run`: fn is the
        session's run, which shutdown waits for."""
        future = self._pool.submit(fn)
        if run and handle is not None:
            handle.running = future
        if redactor is None:
            redactor = handle.session.redactor if handle is not None else self.config.redactor
        try:
            return await asyncio.wrap_future(future)
        except RequestError:
            raise
        except Exception as exc:
            raise as_request_error(exc, redactor) from None

    def redactor_for(self, session_id: str | None) -> Redactor:
        """The redactor of a message that belongs to this session (wire.StdioTransport)."""
        handle = self.handles.get(session_id) if session_id is not None else None
        return handle.session.redactor if handle is not None else self.config.redactor

    async def send_update(self, handle: Handle, update: Update) -> None:
        """One update; the transport redacts it with the session's redactor."""
        if self.client is None or self.closed:
            return
        await self.client.session_update(session_id=handle.id, update=update)

    def stop_runs(self) -> None:
        """The client is going (stdin ended, or SIGTERM): cancel every run; each prompt still
        gets its response, and its last updates go out first (acp_server/wire.py waits)."""
        for handle in self.handles.values():
            handle.agent.cancel.set()

    async def shutdown(self) -> None:
        """Cancel every run, wait for it, release every session's workers and lock."""
        self.closed = True
        for handle in self.handles.values():
            handle.agent.cancel.set()
        for cooler in list(self._coolers):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await cooler
        await asyncio.to_thread(self._close_all)
        self._pool.shutdown(wait=True)

    def _close_all(self) -> None:
        for handle in list(self.handles.values()):
            if handle.running is not None:
                concurrent.futures.wait([handle.running])
            try:
                handle.close()
            except Exception as exc:  # one stubborn session must not keep others locked
                message = self.config.log_redactor.text(f"{type(exc).__name__}: {exc}")
                print(f"jmp: closing session {handle.id} failed: {message}", file=sys.stderr)
        self.handles.clear()
