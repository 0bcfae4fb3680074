"""Session methods of the ACP agent: new, load (replays), resume (does not), close, set_mode,
list. `JmpAcpAgent` (acp_server/server.py), which the SDK's router calls by name, hands each to
this object, which holds only what they need: the settings, the session table and the sender.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Any

from acp import RequestError
from acp.schema import (
    CloseSessionResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    ResumeSessionResponse,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from acp_server import commands, history, modes, sessions
from acp_server.config import Config, load_turns
from acp_server.errors import JMP_ERROR
from acp_server.sender import Sender
from acp_server.sessions import ClientServer, Handle
from acp_server.sink import Sink
from acp_server.table import SessionTable
from acp_server.updates import info
from kernel.store import pending
from protocol.events import ModeData
from protocol.events import SessionMode as ModeId

CLOSE_POLL_S = 0.05  # how often `session/close` looks whether the prompt it cancelled ended


def unsettled(handle: Handle) -> bool:
    """Whether the session has a call whose outcome is unknown (`/acknowledge` is offered)."""
    return bool(pending.unsettled(handle.session.events))


class SessionMethods:
    """How sessions are opened and released (see the module docstring)."""

    def __init__(self, config: Config, table: SessionTable, sender: Sender) -> None:
        self.config, self.table, self.sender = config, table, sender

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[ClientServer] | None = None, **_: Any
    ) -> NewSessionResponse:
        sink = Sink(self.sender)
        client = list(mcp_servers or ())
        handle = await self.table.call(
            partial(sessions.create, self.config, cwd, client, sink),
            redactor=self.config.request_redactor(client),
        )
        sink.bind(handle)
        self.table.handles[handle.id] = handle
        mode = sink.approver.mode
        return NewSessionResponse(
            session_id=handle.id, modes=modes.state(mode), config_options=modes.config_options(mode)
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Sequence[ClientServer] | None = None,
        **_: Any,
    ) -> LoadSessionResponse:
        """Replay the last turns as updates, all before this response (acp_server/history.py:
        a note first when earlier records are left out, and `_meta.jmp.replay` says what was
        sent)."""
        handle, sink = await self._open(cwd, session_id, mcp_servers)
        assert sink.translator is not None
        events = handle.session.events
        limit = load_turns()
        shown = await self.table.call(partial(history.window, events, limit), handle)
        updates = turns = 0
        note = history.note(shown)
        for update in [note] if note is not None else []:
            await self.sender.send_update(handle.id, update)
            updates += 1
        for replayed in sink.translator.replay(history.Tail(events, shown.start, shown.end)):
            await self.sender.send_update(handle.id, replayed)
            updates += 1
            turns += replayed.session_update == "user_message_chunk"
        mode = sink.approver.mode
        return LoadSessionResponse(
            modes=modes.state(mode),
            config_options=modes.config_options(mode),
            field_meta=shown.meta(updates, turns, limit),
        )

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Sequence[ClientServer] | None = None,
        **_: Any,
    ) -> ResumeSessionResponse:
        """Open it as `session/load` does, without replaying its history."""
        mode = (await self._open(cwd, session_id, mcp_servers))[1].approver.mode
        return ResumeSessionResponse(
            modes=modes.state(mode), config_options=modes.config_options(mode)
        )

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        """Cancel its prompt (as `session/cancel`), wait for it, then release its workers and
        its lock; the process serves on."""
        handle = self.table.get(session_id)
        handle.agent.cancel.set()
        await self.table.settled(handle)
        while handle.busy:  # its prompt ends `cancelled` (a permission request too)
            await asyncio.sleep(CLOSE_POLL_S)
        if self.table.handles.get(session_id) is handle:
            del self.table.handles[session_id]
            await self.table.call(handle.close)
        return CloseSessionResponse()

    async def set_session_mode(
        self, mode_id: str, session_id: str, **_: Any
    ) -> SetSessionModeResponse:
        """Recorded in the log (`mode`), so that a new process on the session keeps it; the
        client's config options are told too (`config_option_update`)."""
        await self.switch_mode(self.table.get(session_id), modes.check(mode_id))
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse:
        """The mode, as a config option (its one option); `current_mode_update` tells the
        clients that follow `modes`."""
        handle = self.table.get(session_id)
        mode = modes.check_option(config_id, value)
        await self.switch_mode(handle, mode)
        return SetSessionConfigOptionResponse(config_options=modes.config_options(mode))

    async def switch_mode(self, handle: Handle, mode: ModeId) -> None:
        """Record a new mode and tell the client both ways (`current_mode_update`,
        `config_option_update`); nothing when it is the mode already."""
        sink = handle.sink
        if sink.approver.mode == mode:
            return
        await self.table.call(partial(handle.session.append, ModeData(mode=mode), True), handle)
        sink.approver.mode = mode
        for update in modes.changed(mode):
            await self.sender.send_update(handle.id, update)

    async def announce(self, session_id: str) -> None:
        """What a client shows of a session it just opened, sent after the answer that named
        it: the commands it can type, and for a session with history its title, last activity
        and the context its last Flash request held (`usage_update`)."""
        handle = self.table.handles.get(session_id)
        if handle is None or handle.sink is None or handle.sink.translator is None:
            return
        translator = handle.sink.translator
        await self.sender.send_update(session_id, commands.update(unsettled(handle)))
        await self.table.call(partial(translator.known, handle.session.events), handle)
        if translator.title:
            last = handle.session.events[-1].time if len(handle.session.events) else None
            await self.sender.send_update(session_id, info(translator.title, last))
        usage = translator.usage.update()
        if usage is not None:
            await self.sender.send_update(session_id, usage)

    async def list_sessions(self, cwd: str | None = None, **_: Any) -> ListSessionsResponse:
        from acp_server.listing import session_infos
        from kernel.store.catalog import list_sessions

        def listing() -> ListSessionsResponse:
            if cwd is not None:
                sessions.check_text(cwd, "cwd")  # before a Path sees it
            rows = list_sessions(self.config.home)
            infos: ListSessionsResponse = ListSessionsResponse(sessions=session_infos(rows, cwd))
            return infos

        return await self.table.call(listing)

    async def _open(
        self, cwd: str, session_id: str, mcp_servers: Sequence[ClientServer] | None
    ) -> tuple[Handle, Sink]:
        """Lock and open a session for this client (one open here and idle is reopened, with
        this request's MCP servers)."""
        previous = self.table.handles.get(session_id)
        if previous is not None:
            await self.table.settled(previous)
            if previous.busy:
                raise RequestError(JMP_ERROR, f"session {session_id} has a prompt running")
            self.table.handles.pop(session_id, None)
            await self.table.call(previous.close)
        sink = Sink(self.sender)
        client = list(mcp_servers or ())
        handle = await self.table.call(
            partial(sessions.load, self.config, session_id, cwd, client, sink),
            redactor=self.config.request_redactor(client),
        )
        try:
            # In a thread, as the open (the mode and approvals may read a long log's bytes),
            # and before the handle is found: a prompt never sees it unbound (mode unknown).
            await self.table.call(partial(sink.bind, handle), handle)
        except BaseException:
            await self.table.call(handle.close)  # e.g. a changed record: the lock is released
            raise
        self.table.handles[handle.id] = handle
        return handle, sink
