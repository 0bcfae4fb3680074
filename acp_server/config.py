"""Process-wide settings for `jmp --acp`: the environment's, the configured MCP servers', and
the redactors built from their secrets. Imports no ACP SDK: it is made before the SDK is
loaded (acp_server/main.py answers `initialize` meanwhile).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.errors import ConfigError
from kernel.store.redact import Redactor, environment_secrets

if TYPE_CHECKING:
    from kernel.config.settings import Settings


def whole_number(env: Mapping[str, str], name: str, default: int, least: int) -> int:
    """The variable NAME of ENV as a whole number >= LEAST (unset or blank: DEFAULT); any
    other value is a ConfigError naming it, as the kernel's settings are read."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < least:
        raise ConfigError(f"{name} must be a whole number >= {least}, got {raw!r}")
    return int(raw)


LOAD_TURNS = 50  # the turns a session/load replays (acp_server/history.py)
ENV = "JMP_ACP_LOAD_TURNS"


def load_turns(env: Mapping[str, str] | None = None) -> int:
    """JMP_ACP_LOAD_TURNS: the turns a load replays (0: all of them); a value that is not a
    whole number >= 0 is a ConfigError naming it (`jmp --acp` checks it at its start, before
    the SDK is loaded: this module imports none)."""
    import os

    return whole_number(os.environ if env is None else env, ENV, LOAD_TURNS, least=0)


def warm_sessions(env: Mapping[str, str] | None = None) -> int:
    """JMP_ACP_WARM_SESSIONS: how many idle sessions keep their workers (default 4)."""
    import os

    return whole_number(
        os.environ if env is None else env, "JMP_ACP_WARM_SESSIONS", WARM_SESSIONS, 1
    )


# Sessions whose workers stay alive between prompts (the most recently prompted ones): an editor
# may open dozens of threads, and each warm session holds three workers (one imports OpenHands).
WARM_SESSIONS = 4


def _missing(settings: Settings) -> str | None:
    try:
        settings.require_keys()
    except ConfigError as exc:
        return str(exc)
    return None


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

    def missing_keys(self) -> str | None:
        """What is missing for a model call (the ConfigError text naming each variable), or
        None. When a key is missing the key file is read again first: the person may have run
        `jmp --setup` (ACP's terminal auth) since the settings were read."""
        from kernel.config.keys import load

        if _missing(self.settings()) is None:
            return None
        if load():  # a key the environment lacked came from the file: read the settings again
            with self._lock:
                self._settings = None
        return _missing(self.settings())

    def servers(self, client: Sequence[Any]) -> Any:
        """The configured servers plus the client's; a name used twice is a ConfigError."""
        from acp_server.client_mcp import client_servers

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
        from acp_server.client_mcp import client_servers
        from protocol.mcp_config import server_secrets

        redactor = Redactor(tuple(self.redactor.secrets))
        with contextlib.suppress(Exception):
            redactor.add(*server_secrets(client_servers(client)))
        return redactor
