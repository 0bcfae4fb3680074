"""The client's `mcpServers` (ACP) as the CLI's MCP config entries: every string checked first
(by its ACP field path), then the CLI's own validation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp.schema import AcpMcpServer, HttpMcpServer, McpServerStdio, SseMcpServer

from kernel.errors import ConfigError, UsageError
from protocol.text import text_problem

ClientServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio


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
    environment entry (or, for a header, HTTP header) can carry (protocol/text.py)."""
    problem = text_problem(value, header)
    if problem is not None:
        raise UsageError(f"{field} {problem}")
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
            for j, header in enumerate(server.headers):
                check_text(header.name, f"{where}.headers[{j}].name", header=True)
                check_text(header.value, f"{where}.headers[{j}].value", header=True)


def _entry(server: ClientServer) -> dict[str, Any]:
    if isinstance(server, McpServerStdio):
        env = {item.name: item.value for item in server.env}
        return {"command": server.command, "args": list(server.args), "env": env}
    if isinstance(server, HttpMcpServer | SseMcpServer):
        headers = {item.name: item.value for item in server.headers}
        return {"url": server.url, "headers": headers, "transport": server.type}
    raise ConfigError(f"MCP server {server.name!r}: the ACP transport is not supported")
