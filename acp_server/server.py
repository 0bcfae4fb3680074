"""The ACP agent: initialize, session/prompt and /cancel over the SDK's router, and the session
methods, which it hands to acp_server/session_methods.py (new, load, resume, close, set_mode,
list).

The event loop only routes messages; every kernel call runs in a worker thread (the session
table, acp_server/table.py), so the connection stays responsive (a cancel arrives while a
prompt runs). A run's events become updates through a blocking send from its thread (sink.py,
sender.py): every update of a turn is written before the turn's response, in log order. One
prompt per session at a time; many sessions per process. Each part gets what it needs (the
table, the sender), never this object.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from acp import RequestError, update_agent_message_text
from acp.schema import (
    AuthenticateResponse,
    CloseSessionResponse,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from acp_server import auth, commands, hello, modes, permission
from acp_server.config import WARM_SESSIONS
from acp_server.content import prompt_text
from acp_server.errors import JMP_ERROR
from acp_server.sender import Sender
from acp_server.session_methods import SessionMethods, unsettled
from acp_server.sessions import ClientServer, Config, Handle
from acp_server.table import SessionTable
from kernel.store import pending

if TYPE_CHECKING:
    from acp.interfaces import Client

    from kernel.store.redact import Redactor


NOTHING_TO_ACKNOWLEDGE = "Nothing to acknowledge: no call of this session has an unknown outcome."


class JmpAcpAgent:
    """jmp behind the ACP `Agent` interface (the SDK calls these with snake_case fields)."""

    def __init__(self, config: Config, version: str = "", warm: int = WARM_SESSIONS) -> None:
        self.config = config
        self.version = version
        self.warm = max(1, warm)
        self.sender = Sender()
        self.table = SessionTable(config)
        self.sessions = SessionMethods(config, self.table, self.sender)
        self._coolers: set[asyncio.Future[None]] = set()
        self._told: set[asyncio.Future[None]] = set()  # announcements under way
        self._offered: dict[str, bool] = {}  # per session: was `/acknowledge` last offered

    @property
    def handles(self) -> dict[str, Handle]:
        return self.table.handles

    @property
    def client(self) -> Client | None:
        return self.sender.client

    @property
    def closed(self) -> bool:
        return self.sender.closed

    def on_connect(self, conn: Client) -> None:
        self.sender.connect(conn)

    # --- lifecycle ----------------------------------------------------------------------

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, **_: Any
    ) -> InitializeResponse:
        """The answer acp_server/hello.py gives before the SDK is loaded, as a model."""
        asked = (
            None
            if client_capabilities is None
            else client_capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        answer = hello.result(protocol_version, self.version, asked)
        return InitializeResponse.model_validate(answer)

    async def authenticate(self, method_id: str, **_: Any) -> AuthenticateResponse:
        """`jmp-setup` (acp_server/auth.py): done when the keys are there now (from the
        environment, or the key file `jmp --setup` wrote), else "Authentication required"."""
        if method_id != auth.METHOD_ID:
            reason = f"no auth method {method_id!r}: jmp offers {auth.METHOD_ID!r}"
            raise RequestError.invalid_params({"reason": reason})
        await self._authenticated()
        return AuthenticateResponse()

    async def _authenticated(self) -> None:
        """Both keys are known (the key file looked at again), else the ACP auth error."""
        missing = await self.table.call(self.config.missing_keys)
        if missing is not None:
            raise RequestError(*auth.required(missing))

    # --- sessions (acp_server/session_methods.py) -----------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[ClientServer] | None = None, **_: Any
    ) -> NewSessionResponse:
        await self._authenticated()
        return await self.sessions.new_session(cwd, mcp_servers)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Sequence[ClientServer] | None = None,
        **_: Any,
    ) -> LoadSessionResponse:
        return await self.sessions.load_session(cwd, session_id, mcp_servers)

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Sequence[ClientServer] | None = None,
        **_: Any,
    ) -> ResumeSessionResponse:
        return await self.sessions.resume_session(cwd, session_id, mcp_servers)

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        return await self.sessions.close_session(session_id)

    async def set_session_mode(
        self, mode_id: str, session_id: str, **_: Any
    ) -> SetSessionModeResponse:
        return await self.sessions.set_session_mode(mode_id, session_id)

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse:
        return await self.sessions.set_config_option(config_id, session_id, value)

    async def list_sessions(self, cwd: str | None = None, **_: Any) -> ListSessionsResponse:
        return await self.sessions.list_sessions(cwd)

    def opened(self, session_id: str) -> None:
        """The answer that opened a session is written (acp_server/wire.py): announce it."""
        handle = self.handles.get(session_id)
        if handle is not None:
            self._offered[session_id] = unsettled(handle)
        told = asyncio.ensure_future(self.sessions.announce(session_id))
        self._told.add(told)
        told.add_done_callback(self._told.discard)

    # --- prompts ------------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        """One turn: ask about uncertain calls, then one Agent.run in a thread."""
        handle = self.table.get(session_id)
        text = prompt_text(prompt)
        await self.table.settled(handle)
        if handle.busy:
            raise RequestError(JMP_ERROR, f"session {session_id} already has a prompt running")
        # Taken and cleared with no await since the check: a `session/cancel` that arrives from
        # here on (even before the run has started) is this prompt's, and is kept.
        handle.busy = True
        handle.agent.cancel.clear()
        command = commands.parse(text)
        request: str | None = text
        try:
            if command is not None and command.name != commands.ACKNOWLEDGE:
                return await self._command(handle, command)
            await self.table.call(lambda: self.config.settings().require_keys(), handle)
            acknowledge = False
            waiting = pending.unsettled(handle.session.events)
            if command is not None:  # `/acknowledge`: asked by typing it, so not asked again
                if not waiting:
                    await self._say(
                        handle, "Nothing to acknowledge: no call has an unknown outcome."
                    )
                    return PromptResponse(stop_reason="end_turn")
                request, acknowledge, waiting = None, True, []
            if waiting:
                if handle.agent.cancel.is_set():
                    return PromptResponse(stop_reason="cancelled")  # nothing asked or recorded
                choice = await permission.ask(self.sender, handle, waiting)
                if choice is None:
                    return PromptResponse(stop_reason="cancelled")
                acknowledge = choice
            result = await self.table.call(
                partial(handle.run, request, acknowledge), handle, run=True
            )
        finally:
            handle.busy = False
            handle.last_prompt = time.monotonic()
            await self._offer(handle)
        cooler = asyncio.ensure_future(self._cool_others())  # after the response
        self._coolers.add(cooler)
        cooler.add_done_callback(self._coolers.discard)

        if result["status"] == "cancelled":
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def _command(self, handle: Handle, command: commands.Command) -> PromptResponse:
        """`/compact` (no model, no key) or `/mode auto|ask` (acp_server/commands.py)."""
        if command.name == commands.MODE:
            if command.argument not in (modes.AUTO, modes.ASK):
                await self._say(handle, f"No mode {command.argument!r}: type /mode auto or ask.")
                return PromptResponse(stop_reason="end_turn")
            mode = modes.check(command.argument)
            await self.sessions.switch_mode(handle, mode)
            shown = next(m.name for m in modes.MODES if m.id == mode)
            await self._say(handle, f"Mode: {mode} ({shown}).")
            return PromptResponse(stop_reason="end_turn")
        result = await self.table.call(partial(handle.compact), handle, run=True)
        if result["status"] == "cancelled":
            return PromptResponse(stop_reason="cancelled")
        await self._say(handle, str(result.get("summary") or "Compacted."))
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, handle: Handle, text: str) -> None:
        await self.sender.send_update(handle.id, update_agent_message_text(text))

    async def _offer(self, handle: Handle) -> None:
        """A new `available_commands_update` when `/acknowledge` comes or goes."""
        now = unsettled(handle)
        if self._offered.get(handle.id) != now:
            self._offered[handle.id] = now
            await self.sender.send_update(handle.id, commands.update(now))

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
            handle.cooling = asyncio.ensure_future(self.table.call(handle.cool))
            try:
                await handle.cooling
            finally:
                handle.cooling = None

    def redactor_for(self, session_id: str | None) -> Redactor:
        """The redactor of a message that belongs to this session (wire.StdioTransport)."""
        return self.table.redactor_for(session_id)

    def stop_runs(self) -> None:
        """The client is going (stdin ended, or SIGTERM): cancel every run; each prompt still
        gets its response, and its last updates go out first (acp_server/wire.py waits)."""
        for handle in self.handles.values():
            handle.agent.cancel.set()

    async def shutdown(self) -> None:
        """Cancel every run, wait for it, release every session's workers and lock."""
        self.sender.closed = True
        for handle in self.handles.values():
            handle.agent.cancel.set()
        for cooler in list(self._coolers):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await cooler
        await asyncio.to_thread(self.table.close_all)
