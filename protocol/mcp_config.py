"""MCP server config, as both sides know it: the structs, their validation, their secrets.

Pure (no I/O). The kernel reads and validates the user's file (kernel/config/mcp.py) and hands
the normalized JSON to the tool worker; the tool worker (workers/mcp/toolset.py) validates it again
with the same rules and redacts the same secrets.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Literal

import msgspec

from protocol.text import text_problem

__all__ = [
    "InvalidConfig",
    "RemoteServer",
    "ServerConfig",
    "StdioServer",
    "parse_servers",
    "server_secrets",
]

Transport = Literal["sse", "streamable-http", "http"]
_TRANSPORTS = ("sse", "streamable-http", "http")
_STDIO_FIELDS = frozenset({"command", "args", "env", "cwd", "type"})
_REMOTE_FIELDS = frozenset({"url", "headers", "transport", "type"})
# Flag-like env values ("1", "true", "info") would turn every occurrence in a log into a
# redaction marker without protecting anything; everything else counts as a credential.
_NOT_SECRET = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "debug", "info", "warn", "error"}
)
_MIN_SECRET_CHARS = 4


class StdioServer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A server the tool worker starts as its own child and speaks to over stdin/stdout."""

    command: str
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None


class RemoteServer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A server reached over HTTP (streamable HTTP or SSE)."""

    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    transport: Transport | None = None


ServerConfig = StdioServer | RemoteServer


def server_secrets(servers: dict[str, ServerConfig]) -> list[str]:
    """Every config value that is a credential (docs/MCP.md "Secrets" lists the fields):
    env and header values, secret-named arguments, and the secret parts of URLs."""
    found: list[str] = []
    for server in servers.values():
        if isinstance(server, StdioServer):
            for value in server.env.values():
                found.extend(_secret_parts(value))
            found.extend(_argument_secrets(server.args))
        else:
            for value in server.headers.values():
                found.extend(_secret_parts(value))
            found.extend(_url_secrets(server.url))
    return sorted(set(found))


def parse_servers(document: object) -> dict[str, ServerConfig]:
    """Validate a decoded `{"mcpServers": {...}}` document; raises InvalidConfig (field path)."""
    top = _mapping(document, "(top level)")
    _no_unknown(top, frozenset({"mcpServers"}), "")
    if "mcpServers" not in top:
        raise InvalidConfig("mcpServers: required field is missing")
    entries = _mapping(top["mcpServers"], "mcpServers")
    servers: dict[str, ServerConfig] = {}
    for name, entry in entries.items():
        where = f"mcpServers.{name}"
        _string(name, f"mcpServers name {name!r}")
        if not name.strip():
            raise InvalidConfig(f"{where}: server name must not be empty")
        servers[name] = _server(_mapping(entry, where), where)
    return servers


class InvalidConfig(ValueError):
    """A config field is wrong; the message starts with its path."""


def _server(entry: dict[str, Any], where: str) -> ServerConfig:
    if "command" in entry and "url" in entry:
        raise InvalidConfig(f"{where}: give either command (stdio) or url (remote), not both")
    if "command" in entry:
        return _stdio(entry, where)
    if "url" in entry:
        return _remote(entry, where)
    raise InvalidConfig(f"{where}: missing command (stdio server) or url (remote server)")


def _stdio(entry: dict[str, Any], where: str) -> StdioServer:
    _no_unknown(entry, _STDIO_FIELDS, where)
    if entry.get("type", "stdio") != "stdio":
        raise InvalidConfig(f'{where}.type: expected "stdio" for a server with a command')
    command = _string(entry["command"], f"{where}.command")
    if not command.strip():
        raise InvalidConfig(f"{where}.command: must not be empty")
    args = entry.get("args", [])
    if not isinstance(args, list):
        raise InvalidConfig(f"{where}.args: expected a list of str")
    cwd = entry.get("cwd")
    return StdioServer(
        command=command,
        args=[_string(arg, f"{where}.args[{i}]") for i, arg in enumerate(args)],
        env=_environment(entry.get("env", {}), f"{where}.env"),
        cwd=None if cwd is None else _string(cwd, f"{where}.cwd"),
    )


def _remote(entry: dict[str, Any], where: str) -> RemoteServer:
    _no_unknown(entry, _REMOTE_FIELDS, where)
    url = _string(entry["url"], f"{where}.url", header=True)
    if not url.startswith(("http://", "https://")):
        raise InvalidConfig(f"{where}.url: expected an http:// or https:// URL")
    transport = entry.get("transport", entry.get("type"))
    field = "transport" if "transport" in entry else "type"
    if transport is not None and transport not in _TRANSPORTS:
        raise InvalidConfig(f"{where}.{field}: expected one of {', '.join(_TRANSPORTS)}")
    return RemoteServer(
        url=url,
        headers=_string_map(entry.get("headers", {}), f"{where}.headers", header=True),
        transport=transport,
    )


def _mapping(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidConfig(f"{where}: expected an object, got {_kind(value)}")
    return value


def _string(value: object, where: str, header: bool = False) -> str:
    """A str that a path, argument, environment entry (header: HTTP header) can hold."""
    if not isinstance(value, str):
        raise InvalidConfig(f"{where}: expected str, got {_kind(value)}")
    problem = text_problem(value, header)
    if problem is not None:
        raise InvalidConfig(f"{where}: {problem}")
    return value


def _string_map(value: object, where: str, header: bool = False) -> dict[str, str]:
    mapping = _mapping(value, where)
    for key in mapping:
        _string(key, f"{where} name {key!r}", header)
    return {key: _string(item, f"{where}.{key}", header) for key, item in mapping.items()}


def _environment(value: object, where: str) -> dict[str, str]:
    env = _string_map(value, where)
    for name in env:
        if not name or "=" in name:
            raise InvalidConfig(
                f"{where}: {name!r} is not an environment variable name (empty, or it holds '=')"
            )
    return env


def _no_unknown(entry: dict[str, Any], known: frozenset[str], where: str) -> None:
    for key in entry:
        if key not in known:
            allowed = ", ".join(sorted(known))
            path = f"{where}.{key}" if where else key
            raise InvalidConfig(f"{path}: unknown field (allowed: {allowed})")


def _kind(value: object) -> str:
    names = {dict: "object", list: "list", str: "str", bool: "bool", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _secret_parts(value: str) -> list[str]:
    """The value itself, and the token after an auth scheme ("Bearer abc" -> "abc")."""
    if len(value) < _MIN_SECRET_CHARS or value.strip().lower() in _NOT_SECRET:
        return []
    parts = [value]
    scheme, _, token = value.partition(" ")
    if token and scheme.lower() in {"bearer", "basic", "token", "apikey"}:
        parts.extend(_secret_parts(token.strip()))
    return parts


# An argument or query parameter whose name says it carries a credential.
_SECRET_NAME = re.compile(
    r"key|token|secret|passw|passphrase|pwd|auth|credential|signature|cookie|^sig$", re.I
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"']+")
# A URL path segment or query value that looks like a token (long, letters and digits).
_TOKENISH = re.compile(r"^(?=.*[A-Za-z])(?=.*[0-9])[A-Za-z0-9._~+/=-]{20,}$")


def _argument_secrets(args: list[str]) -> list[str]:
    """`--api-key=X`, `--token X`, `API_KEY=X` (a secret-named option's value), and the secret
    parts of any URL among the arguments."""
    found: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if "://" in name:  # a URL, not NAME=VALUE
            eq = ""
        elif eq and _SECRET_NAME.search(name.lstrip("-")):
            found.extend(_secret_parts(value))
        elif not eq and _is_secret_flag(arg) and i + 1 < len(args):
            found.extend(_secret_parts(args[i + 1]))
        for url in _URL.findall(arg):
            found.extend(_url_secrets(url))
    return found


def _is_secret_flag(arg: str) -> bool:
    """`--token`, `-api-key`: an option whose value follows as the next argument."""
    return arg.startswith("-") and bool(_SECRET_NAME.search(arg.lstrip("-")))


def _url_secrets(url: str) -> list[str]:
    """The user info (password), secret-named or token-like query values, token-like path
    segments of a URL."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=False)
    except ValueError:
        return []
    found: list[str] = []
    if parts.password:
        found.extend(_secret_parts(parts.password))
        found.extend(_secret_parts(parts.netloc.rpartition("@")[0]))
    elif "@" in parts.netloc:
        found.extend(_secret_parts(parts.netloc.rpartition("@")[0]))
    for name, value in query:
        if _SECRET_NAME.search(name) or _TOKENISH.match(value):
            found.extend(_secret_parts(value))
            raw = urllib.parse.quote(value, safe="")
            if raw != value:  # the form it has inside the URL text
                found.extend(_secret_parts(raw))
    found.extend(seg for seg in parts.path.split("/") if _TOKENISH.match(seg))
    return found
