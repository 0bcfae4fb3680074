"""Opening sessions for ACP clients: settings, MCP servers (configured + the client's), handles.

Everything here is synchronous and runs in a worker thread, never on the event loop: opening a
session takes its lock and reads its log, and a subscriber may block on the connection.
A session stays open (locked, its workers alive between prompts) until `session/close` or the
end of the process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.client_mcp import ClientServer, check_text, client_servers
from acp_server.config import Config
from kernel.errors import JmpError, UsageError
from protocol.events import Event

__all__ = ["ClientServer", "Config", "Handle", "check_text", "client_servers", "create", "load"]

if TYPE_CHECKING:
    from kernel.loop.agent import Agent
    from kernel.store.session import Session

EventSink = Callable[[Event], None]


class Handle:
    """One open session served to the client: its agent, and whether a prompt runs on it."""

    def __init__(self, session: Session, agent: Agent) -> None:
        self.session = session
        self.agent = agent
        self.busy = False
        self.running: Any = None  # the concurrent Future of the prompt in progress
        self.last_prompt = 0.0  # time.monotonic() of the last prompt's end; 0.0: cold
        self.cooling: Any = None  # the asyncio Future of a running `cool()`
        self.sink: Any = None  # its acp_server.sink.Sink, once bound

    @property
    def id(self) -> str:
        return self.session.id

    def run(self, text: str | None, acknowledge: bool) -> dict[str, Any]:
        """One `Agent.run` for a prompt (in a worker thread); every record of it is shown
        before the prompt's response, also when the run raised."""
        try:
            return self.agent.run(prompt=text, acknowledge_pending=acknowledge)
        finally:
            with contextlib.suppress(JmpError):  # the run's own error says what failed
                self.session.sync()

    def compact(self) -> dict[str, Any]:
        """`/compact`: the CLI's `--compact` (local, no model call); shown before the reply."""
        try:
            return self.agent.run(prompt=None, compact=True)
        finally:
            with contextlib.suppress(JmpError):
                self.session.sync()

    def cool(self) -> None:
        """Stop this idle session's workers (their trees too); the lock stays held and the next
        prompt starts fresh ones."""
        self.last_prompt = 0.0
        for part in (self.agent.models, self.agent.tools):
            try:
                part.close()
            except Exception as exc:  # a worker that resists is the supervisor's to report
                message = self.session.redactor.text(f"{type(exc).__name__}: {exc}")
                print(f"jmp: stopping idle workers of {self.id}: {message}", file=sys.stderr)

    def close(self) -> None:
        """Workers and the lock released; idempotent."""
        self.agent.close()


def workspace_of(cwd: str) -> Path:
    """The client's cwd as a workspace: text a path can hold, absolute, an existing directory."""
    path = Path(check_text(cwd, "cwd"))
    if not path.is_absolute():
        raise UsageError(f"cwd {cwd!r} must be an absolute path")
    if not path.is_dir():
        raise UsageError(f"cwd {cwd} does not exist or is not a directory")
    return path.resolve()


def create(config: Config, cwd: str, client: Sequence[ClientServer], sink: EventSink) -> Handle:
    """A new session bound to cwd; keys are checked before anything is created."""
    from kernel.loop.opening import open_agent

    settings = config.settings()
    settings.require_keys()  # (the door checks them too) a missing key is named before the cwd
    workspace = workspace_of(cwd)
    servers = config.servers(client)
    agent = open_agent(
        config.home,
        settings,
        lambda: servers,
        workspace=workspace,
        on_event=sink,
        secrets=config.session_secrets(settings, servers),
        approve=getattr(sink, "approver", None),
        on_answer=getattr(sink, "answer", None),
    )
    return Handle(agent.session, agent)


def load(
    config: Config, session_id: str, cwd: str, client: Sequence[ClientServer], sink: EventSink
) -> Handle:
    """Lock and load a session; a cwd other than its workspace is refused, as in the CLI."""
    from kernel.loop.opening import open_agent

    settings = config.settings()
    workspace = workspace_of(cwd)  # a cwd no path can have is refused before the session
    servers = config.servers(client)
    agent = open_agent(
        config.home,
        settings,
        lambda: servers,
        session_id=session_id,
        workspace=workspace,
        named=f"cwd {cwd}",
        on_event=sink,
        secrets=config.session_secrets(settings, servers),
        approve=getattr(sink, "approver", None),
        on_answer=getattr(sink, "answer", None),
    )
    return Handle(agent.session, agent)
