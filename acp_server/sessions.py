"""Opening sessions for ACP clients: settings, MCP servers (configured + the client's), handles.

Everything here is synchronous and runs in a worker thread, never on the event loop: opening a
session takes its lock and reads its log, and a subscriber may block on the connection.
A session stays open (locked, its workers alive between prompts) until the process ends.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.schema import AcpMcpServer, HttpMcpServer, McpServerStdio, SseMcpServer

from kernel.errors import ConfigError, UsageError
from kernel.store.redact import Redactor, environment_secrets
from protocol.events import Event

if TYPE_CHECKING:
    from kernel.config.settings import Settings
    from kernel.loop.agent import Agent
    from kernel.store.session import Session

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
ClientServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio
EventSink = Callable[[Event], None]


class Config:
    """Process-wide settings and the configured MCP servers, each read once, errors kept.

    Two redactors: `redactor` knows the process's secrets (every key variable, the settings',
    the configured servers'), for what belongs to no session; `log_redactor` knows those and
    every secret any client supplied, for stderr, which is no client's. A client's own secrets
    are its session's (Session.redactor): they never change another session's frames.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.redactor = Redactor(environment_secrets())  # every key variable, used or not
        self.log_redactor = Redactor(environment_secrets())
        self._lock = threading.Lock()
        self._settings: Settings | ConfigError | None = None
        self._servers: Any = None

    def settings(self) -> Settings:
        """The environment's settings; a bad value raises the same ConfigError every time."""
        with self._lock:
            if self._settings is None:
                try:
                    from kernel.config.settings import Settings

                    read = Settings.environment()
                    self.redactor.add(*read.secrets)
                    self.log_redactor.add(*read.secrets)
                    self._settings = read
                except ConfigError as exc:
                    self._settings = exc
            if isinstance(self._settings, ConfigError):
                raise self._settings
            return self._settings

    def servers(self, client: Sequence[ClientServer]) -> Any:
        """The configured servers plus the client's; a name used twice is a ConfigError."""
        with self._lock:
            if self._servers is None:
                from kernel.config.mcp import load_servers

                self._servers = load_servers()  # read once (CONTRACT 10)
                self.redactor.add(*self._servers.secrets)
                self.log_redactor.add(*self._servers.secrets)
        configured = self._servers
        merged = dict(configured.servers)
        for name, spec in client_servers(client).items():
            if name in merged:
                where = f" in {configured.path}" if configured.path else ""
                raise ConfigError(
                    f"MCP server name clash: the client's server {name!r} has the same name as a "
                    f"configured server{where}; rename one of them"
                )
            merged[name] = spec
        combined = type(configured)(merged, configured.path)
        self.log_redactor.add(*combined.secrets)
        return combined

    def session_secrets(self, settings: Settings, servers: Any) -> tuple[str, ...]:
        """A session's secrets: the process's and its own servers' (the client's among them)."""
        return (*self.redactor.secrets, *settings.secrets, *servers.secrets)

    def request_redactor(self, client: Sequence[Any]) -> Redactor:
        """For the errors of a request that opens a session: the process's secrets and those of
        the client's servers in it (when they can be read at all)."""
        from protocol.mcp_config import server_secrets

        redactor = Redactor(tuple(self.redactor.secrets))
        with contextlib.suppress(Exception):
            redactor.add(*server_secrets(client_servers(client)))
        return redactor


def client_servers(client: Sequence[ClientServer]) -> dict[str, Any]:
    """The client's `mcpServers` as validated config entries (the CLI's own validation, after
    `check_servers`); what is wrong is a UsageError (invalid params) naming the field."""
    from kernel.config.mcp import parse_servers

    check_servers(client)
    entries: dict[str, dict[str, Any]] = {}
    for server in client:
        if server.name in entries:
            raise UsageError(f"the client's mcpServers name {server.name!r} twice")
        entries[server.name] = _entry(server)
    try:
        return dict(parse_servers({"mcpServers": entries}))
    except ValueError as exc:
        raise UsageError(f"the client's mcpServers: {exc}") from None


def check_text(value: str, field: str, header: bool = False) -> str:
    """value, or a UsageError naming the field when it holds what no path, argument,
    environment entry (or, for a header, HTTP header) can carry: a NUL, a lone surrogate
    (JSON can spell one, UTF-8 cannot), a line break in a header."""
    if "\x00" in value:
        raise UsageError(f"{field} contains a NUL character, which no path or argument can hold")
    surrogate = LONE_SURROGATE.search(value)
    if surrogate is not None:
        code = f"U+{ord(surrogate.group()):04X}"
        raise UsageError(f"{field} contains a lone surrogate ({code}), which is not text")
    if header and ("\r" in value or "\n" in value):
        raise UsageError(f"{field} contains a line break, which no HTTP header can hold")
    return value


def check_servers(client: Sequence[ClientServer]) -> None:
    """Every string of the client's `mcpServers`, named by its ACP field path."""
    for i, server in enumerate(client):
        where = f"mcpServers[{i}]"
        check_text(server.name, f"{where}.name")
        if isinstance(server, McpServerStdio):
            check_text(server.command, f"{where}.command")
            for j, arg in enumerate(server.args):
                check_text(arg, f"{where}.args[{j}]")
            for j, item in enumerate(server.env):
                check_text(item.name, f"{where}.env[{j}].name")
                if not item.name or "=" in item.name:
                    raise UsageError(
                        f"{where}.env[{j}].name {item.name!r} is not an environment variable "
                        "name (empty, or it holds '=')"
                    )
                check_text(item.value, f"{where}.env[{j}].value")
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            check_text(server.url, f"{where}.url", header=True)
            for j, item in enumerate(server.headers):
                check_text(item.name, f"{where}.headers[{j}].name", header=True)
                check_text(item.value, f"{where}.headers[{j}].value", header=True)


def _entry(server: ClientServer) -> dict[str, Any]:
    if isinstance(server, McpServerStdio):
        env = {item.name: item.value for item in server.env}
        return {"command": server.command, "args": list(server.args), "env": env}
    if isinstance(server, HttpMcpServer | SseMcpServer):
        headers = {item.name: item.value for item in server.headers}
        return {"url": server.url, "headers": headers, "transport": server.type}
    raise ConfigError(f"MCP server {server.name!r}: the ACP transport is not supported")


class Handle:
    """One open session served to the client: its agent, and whether a prompt runs on it."""

    def __init__(self, session: Session, agent: Agent) -> None:
        self.session = session
        self.agent = agent
        self.busy = False
        self.running: Any = None  # the concurrent Future of the prompt in progress
        self.last_prompt = 0.0  # time.monotonic() of the last prompt's end; 0.0: cold
        self.cooling: Any = None  # the asyncio Future of a running `cool()`

    @property
    def id(self) -> str:
        return self.session.id

    def run(self, text: str, acknowledge: bool) -> dict[str, Any]:
        """One `Agent.run` for a prompt (in a worker thread)."""
        return self.agent.run(prompt=text, acknowledge_pending=acknowledge)

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
    )
    return Handle(agent.session, agent)
