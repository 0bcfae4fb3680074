"""MCP server configuration: read `{"mcpServers": {...}}` once, validate it, collect secrets.

The kernel never talks MCP itself: it validates the file, adds the env and header values to the
redactor's known credentials, and hands the normalized JSON to the tool worker on its stdin
(never its environment, which the worker's shells would inherit).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec

from kernel.errors import ConfigError
from protocol.mcp_config import (
    InvalidConfig,
    RemoteServer,
    ServerConfig,
    StdioServer,
    parse_servers,
    server_secrets,
)

__all__ = [
    "McpServers",
    "RemoteServer",
    "ServerConfig",
    "StdioServer",
    "load_servers",
    "parse_servers",
]

ENV_PATH = "JMP_MCP_CONFIG"


def default_path() -> Path:
    """Where the config is read when JMP_MCP_CONFIG is not set: PROJECT/.jmp/mcp.json in a
    checkout, $XDG_CONFIG_HOME/jmp/mcp.json for an installed copy (kernel/config/install.py)."""
    from kernel.config.install import default_mcp_config

    return default_mcp_config()


class McpServers:
    """The validated servers of one config file; false when there are none."""

    def __init__(self, servers: dict[str, ServerConfig], path: Path | None) -> None:
        self.servers = servers
        self.path = path

    @property
    def secrets(self) -> list[str]:
        """Every config value that is a credential (docs/MCP.md "Secrets" lists the fields):
        env and header values, secret-named arguments, and the secret parts of URLs."""
        return server_secrets(self.servers)

    def to_json(self) -> str:
        """The `{"mcpServers": ...}` JSON for the tool worker (contains the secrets)."""
        return msgspec.json.encode({"mcpServers": self.servers}).decode()

    def __bool__(self) -> bool:
        return bool(self.servers)

    def __len__(self) -> int:
        return len(self.servers)

    def __repr__(self) -> str:  # never show env or header values
        return f"McpServers(path={self.path}, servers={sorted(self.servers)})"


def load_servers(path: str | Path | None = None, *, enabled: bool = True) -> McpServers:
    """Read and validate the MCP config; raises ConfigError naming the file and field."""
    if not enabled:
        return McpServers({}, None)
    explicit = path is not None or bool(os.environ.get(ENV_PATH))
    chosen = Path(path if path is not None else os.environ.get(ENV_PATH) or default_path())
    try:
        raw = chosen.read_bytes()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"MCP config {chosen} does not exist") from None
        return McpServers({}, None)
    except OSError as exc:
        raise ConfigError(f"MCP config {chosen} cannot be read: {exc.strerror}") from None
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"MCP config {chosen} is not valid JSON: {exc}") from None
    try:
        servers = parse_servers(document)
    except InvalidConfig as exc:
        raise ConfigError(f"MCP config {chosen}: {exc}") from None
    return McpServers(servers, chosen)
