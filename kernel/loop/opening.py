"""The one door to an agent: `open_agent` opens or creates a session and builds its Agent.

Every front end of the agent family comes in here: the CLI (`cli/run.py`), the ACP server
(`acp_server/sessions.py`) and the Python boundary (`main.open_agent`). In order, so that a
failure leaves nothing behind and names the first problem:

  new session: admission of the request (a prompt that can never fit is refused), the keys,
               the MCP servers, then the session, bound to its workspace (checked there)
  existing:    the session (lock, log), the workspace it is bound to against the one given,
               read-only storage against what the run needs, then the keys and the MCP servers
               if the run needs models (a replay needs none)

The session's redactor knows the union of the secrets: every key variable that is set, the
settings', the MCP servers' and the front end's own. Then Models, Tools and the Agent; if any
of that fails the session is closed again (its lock released).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.errors import WorkspaceMismatch

if TYPE_CHECKING:
    from kernel.config.mcp import McpServers
    from kernel.config.settings import Settings
    from kernel.loop.agent import Agent
    from kernel.store.session import EventCallback, Session
    from kernel.supervision.supervisor import Worker


@dataclass(frozen=True)
class Planned:
    """The one run a front end opens the agent for (the CLI's): its request is admitted before
    a session exists, and an existing session is checked against what it needs. A front end
    whose requests come later (an editor's session) plans none."""

    prompt: str | None = None
    compact: bool = False


def open_agent(
    home: Path,
    settings: Settings,
    servers: Callable[[], McpServers],
    *,
    session_id: str | None = None,
    workspace: Path | None = None,
    named: str = "",
    planned: Planned | None = None,
    on_event: EventCallback | None = None,
    secrets: Iterable[str] = (),
    router: Worker | None = None,
    cancel: threading.Event | None = None,
    **agent: Any,
) -> Agent:
    """An Agent on a new session (`session_id` None: bound to `workspace`) or an existing one
    (then `workspace`, when given, must be the one it is bound to; `named` is how the front end
    names it in the refusal, e.g. "--workspace DIR" or "cwd DIR").

    `servers` loads the MCP servers (only when the run may need them); `secrets` are the front
    end's own; `router` one started early (Models adopts it); `agent` goes to the Agent
    (`policy`, `approve`, ...). Raises a JmpError (a usage, config, storage or lock error)
    with nothing created or held.
    """
    from kernel.loop.resume import needs_models, read_only_error
    from kernel.store.redact import environment_secrets
    from kernel.store.session import Session

    known = (*environment_secrets(), *secrets, *settings.secrets)
    if session_id is None:
        if planned is not None and planned.prompt is not None:
            _admit(planned.prompt, settings)
        settings.require_keys()
        configured = servers()
        where = workspace if workspace is not None else Path.cwd()
        session = Session.create(
            home, where.resolve(), on_event=on_event, secrets=(*known, *configured.secrets)
        )
        return _build(session, settings, configured, router, cancel, agent)
    session = Session.open(home, session_id, on_event=on_event, secrets=known)
    try:
        if workspace is not None and workspace.resolve() != session.workspace.resolve():
            raise WorkspaceMismatch(
                f"session {session.id} is bound to workspace {session.workspace}; "
                f"{named or workspace} differs"
            )
        prompt, compact = (planned.prompt, planned.compact) if planned else (None, False)
        models_needed = planned is None or needs_models(session, prompt, compact)
        if planned is not None and session.read_only and (compact or models_needed):
            raise read_only_error(session)
        loaded: McpServers | None = None
        if models_needed:
            if planned is not None:  # a planned run that needs models needs its keys now
                settings.require_keys()
            loaded = servers()
            session.redactor.add(*loaded.secrets)
    except BaseException:
        session.close()
        raise
    return _build(session, settings, loaded, router, cancel, agent)


def _admit(prompt: str, settings: Settings) -> None:
    """A first request that can never fit the router's budget: refused before the session."""
    from kernel.context.policy import ContextPolicy
    from kernel.loop import admit
    from protocol.text import clean

    policy = ContextPolicy.from_settings(settings.jev_context_bytes, settings.flash_context_bytes)
    admit.check(policy, [], clean(prompt))


def _build(
    session: Session,
    settings: Settings,
    servers: McpServers | None,
    router: Worker | None,
    cancel: threading.Event | None,
    options: dict[str, Any],
) -> Agent:
    """Models, Tools and the Agent on an open session; the session is closed if one fails."""
    from kernel.loop.agent import Agent
    from kernel.loop.prompts import instructions
    from kernel.supervision.models import Models
    from kernel.supervision.tools import Tools

    try:
        models = Models(session, settings, router)
        tools = Tools(session.workspace, session.directory / "terminal", servers)
        options.setdefault("instructions", instructions())
        return Agent(session, models, tools, cancel=cancel or threading.Event(), **options)
    except BaseException:
        session.close()
        raise
