"""MCP tools for the tool worker: OpenHands `create_mcp_tools`, one client per configured server.

Each server gets its own MCPClient (its own event loop thread), so one slow or dead server never
blocks another, and tool names stay the servers' own (the SDK prefixes them when several servers
share one client). Stdio servers are children of this process: mcp starts each in a new session
(so it can killpg the server's own subtree), and our launcher sets PR_SET_PDEATHSIG so a server
dies with the thread that started it, even when this worker is killed with SIGKILL.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import mcp.types
import psutil
from openhands.sdk.mcp import MCPServer, create_mcp_tools
from openhands.sdk.mcp.client import MCPClient

from protocol.mcp_config import RemoteServer, ServerConfig, parse_servers, server_secrets
from protocol.messages import ToolSpec
from protocol.spawn import TOKEN_ENV as TREE_TOKEN_ENV

TOOL_LIMIT = 250  # CONTRACT 10: advertised tools, the `recall` built-in included
MAX_MCP_TOOLS = TOOL_LIMIT - 1
CALL_TIMEOUT_S = 120.0
START_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 5.0  # per server; mcp itself waits 2 s after closing stdin, then kills
POLL_S = 0.05  # how quickly a cancel Event is noticed during a call
TOKEN_VAR = "JMP_MCP_TOOLSET"  # marks our servers' environment so close() can find them

# Runs as `python -I -S -c LAUNCH PPID COMMAND ARGS...` and becomes COMMAND (same pid).
# PR_SET_PDEATHSIG (1) fires when the starting thread dies, so a SIGKILLed worker leaves no
# server behind; the ppid check closes the race where the worker died before prctl ran.
LAUNCH = """\
import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot start MCP server {sys.argv[2]!r}: {exc.strerror}\\n")
    os._exit(127)
"""


class UnknownTool(LookupError):
    """No MCP tool of that name is offered."""


@dataclass
class _Server:
    """One started server: its SDK client and its tools by their own (unprefixed) names."""

    name: str
    client: MCPClient
    tools: dict[str, mcp.types.Tool]
    broken: bool = False  # a transport failure happened: reconnect before the next call
    lock: threading.Lock = field(default_factory=threading.Lock)


def start_toolset(
    config: dict[str, Any], *, start_timeout_s: float = START_TIMEOUT_S
) -> McpToolset:
    """Start every configured server in parallel; a server that fails is recorded in `.failed`.

    Raises ValueError on a tool-name clash or more than MAX_MCP_TOOLS tools (nothing left running).
    """
    servers = parse_servers(config if "mcpServers" in config else {"mcpServers": config})
    token = uuid.uuid4().hex
    secrets = server_secrets(servers)
    started: dict[str, _Server] = {}
    failed: dict[str, str] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        futures = {
            name: pool.submit(_start, name, spec, token, start_timeout_s)
            for name, spec in servers.items()
        }
        for name, future in futures.items():
            try:
                started[name] = future.result()
            except Exception as exc:
                failed[name] = _redact(_start_reason(exc), secrets)
    toolset = McpToolset(started, failed, secrets, token)
    try:
        toolset.check_limits()
    except ValueError:
        toolset.close()
        raise
    return toolset


class McpToolset:
    """The live MCP tools of one tool worker. Thread-safe for one call per server at a time."""

    def __init__(
        self, servers: dict[str, _Server], failed: dict[str, str], secrets: list[str], token: str
    ) -> None:
        self._servers = servers
        self.failed = failed
        self._secrets = secrets
        self._token = token
        self._by_name = {
            f"mcp.{tool}": (server, tool) for server in servers.values() for tool in server.tools
        }
        self.specs = [
            ToolSpec(
                name=f"mcp.{tool.name}",
                description=tool.description or f"MCP tool {tool.name} of server {server.name}.",
                parameters=copy.deepcopy(tool.inputSchema),
                source=f"mcp:{server.name}",
            )
            for server in servers.values()
            for tool in server.tools.values()
        ]

    def check_limits(self) -> None:
        """Raise ValueError on a name clash between servers or too many tools."""
        owner: dict[str, str] = {}
        for server in self._servers.values():
            for tool in server.tools:
                if tool in owner:
                    raise ValueError(
                        f"MCP tool name clash: tool {tool!r} is offered by both server "
                        f"{owner[tool]!r} and server {server.name!r}; remove or rename one "
                        "of them in the MCP config"
                    )
                owner[tool] = server.name
        if len(owner) > MAX_MCP_TOOLS:
            raise ValueError(
                f"MCP servers advertise {len(owner)} tools; with the recall tool that is "
                f"{len(owner) + 1}, more than the limit of {TOOL_LIMIT} advertised tools. "
                "Use a smaller MCP configuration (fewer servers, or servers with fewer tools)."
            )

    def validate(self, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Check `args` against the server's own input schema; returns (args, target)."""
        server, tool = self._lookup(name)
        schema = server.tools[tool].inputSchema
        error = _schema_error(schema, args)
        if error is None:
            return dict(args), server.name
        # Generators often send null for an optional field they mean to leave out.
        required = set(schema.get("required", []))
        pruned = {k: v for k, v in args.items() if v is not None or k in required}
        if pruned != args and _schema_error(schema, pruned) is None:
            return pruned, server.name
        raise ValueError(f"invalid arguments for {name}: {error}")

    def call(
        self,
        name: str,
        args: dict[str, Any],
        cancel: threading.Event | None = None,
        *,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Call one tool: {status, text, error, exit_code}; never hangs past `timeout_s`
        (default 120 s) or a set `cancel`. An isError answer is status ok, marked in text."""
        server, tool = self._lookup(name)
        limit_s = timeout_s or CALL_TIMEOUT_S
        with server.lock:
            # The SDK's own sync helper blocks until done; its portal gives a cancellable future.
            future = server.client._executor.portal.start_task_soon(
                self._invoke, server, tool, args
            )
            outcome = _wait(future, cancel, time.monotonic() + limit_s)
        if outcome == "cancelled":
            return _failure(f"MCP call {name} cancelled")
        if outcome == "timeout":
            return _failure(
                f"MCP call {name} timed out after {limit_s:g} s (server {server.name!r})"
            )
        try:
            result = future.result()
        except Exception as exc:
            server.broken = server.broken or _is_transport_failure(exc)
            reason = _redact(_reason(exc), self._secrets)
            return _failure(f"MCP server {server.name!r} failed during {tool}: {reason}")
        return _success(server.name, result)

    async def _invoke(self, server: _Server, tool: str, args: dict[str, Any]) -> Any:
        if server.broken:  # the server died earlier: start it again once, for this call
            await server.client.close()
            await server.client.connect()
            server.broken = False
        return await server.client.call_tool_mcp(name=tool, arguments=args)

    def server_pids(self) -> list[int]:
        """Pids of the live stdio server processes this toolset started."""
        return [proc.pid for proc in self._server_procs()]

    def _server_procs(self) -> list[psutil.Process]:
        """The live stdio server processes, as psutil handles that remember their create time,
        so a pid the system reused meanwhile is never signalled."""
        procs = []
        for child in psutil.Process().children():
            try:
                if child.environ().get(TOKEN_VAR) == self._token:
                    procs.append(child)
            except (psutil.Error, OSError):
                continue  # exited or a zombie: nothing to find or kill
        return procs

    def close(self) -> None:
        """Stop every server; afterwards none of their processes is alive."""
        procs = self._server_procs()
        closers = [
            threading.Thread(target=_close_client, args=(s.client,), daemon=True)
            for s in self._servers.values()
        ]
        for thread in closers:
            thread.start()
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for thread in closers:
            thread.join(max(0.0, deadline - time.monotonic()))
        _kill(procs + self._server_procs())
        self._servers = {}
        self._by_name = {}

    def _lookup(self, name: str) -> tuple[_Server, str]:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownTool(f"unknown MCP tool {name!r}") from None


def _start(name: str, spec: ServerConfig, token: str, timeout_s: float) -> _Server:
    """Start one server through the SDK and list its tools; raises with a readable reason."""
    client = create_mcp_tools({name: _sdk_server(spec, token)}, timeout=timeout_s)
    tools = {tool.mcp_tool.name: tool.mcp_tool for tool in client.tools}
    return _Server(name=name, client=client, tools=tools)


def _sdk_server(spec: ServerConfig, token: str) -> MCPServer:
    if isinstance(spec, RemoteServer):
        return MCPServer(url=spec.url, headers=spec.headers or None, transport=spec.transport)
    env = {**spec.env, TOKEN_VAR: token}
    # mcp hands a stdio server only a minimal environment: pass on the kernel's tree token
    # so its process-tree net finds our servers too.
    if os.environ.get(TREE_TOKEN_ENV):
        env[TREE_TOKEN_ENV] = os.environ[TREE_TOKEN_ENV]
    path = env.get("PATH", os.environ.get("PATH"))
    if shutil.which(spec.command, path=path) is None and not os.path.isfile(spec.command):
        raise FileNotFoundError(f"command not found: {spec.command}")
    command, args = spec.command, list(spec.args)
    if sys.platform.startswith("linux"):
        launch = [sys.executable, "-I", "-S", "-c", LAUNCH, str(os.getpid())]
        command, args = launch[0], [*launch[1:], spec.command, *spec.args]
    return MCPServer(command=command, args=args, env=env, cwd=spec.cwd)


def _wait(
    future: concurrent.futures.Future[Any], cancel: threading.Event | None, deadline: float
) -> str:
    """Wait for the call: "done", or "cancelled"/"timeout" after cancelling its task."""
    while True:
        done, _ = concurrent.futures.wait([future], timeout=POLL_S)
        if done:
            return "done"
        if cancel is not None and cancel.is_set():
            future.cancel()
            return "cancelled"
        if time.monotonic() >= deadline:
            future.cancel()
            return "timeout"


def _success(server: str, result: mcp.types.CallToolResult) -> dict[str, Any]:
    text = _content_text(result)
    if result.isError:  # an answer, not a failure: the model should read what the server said
        text = f"[error result from MCP server {server!r}]\n{text}"
    return {"status": "ok", "text": text, "error": "", "exit_code": None}


def _failure(error: str) -> dict[str, Any]:
    return {"status": "error", "text": "", "error": error, "exit_code": None}


def _content_text(result: mcp.types.CallToolResult) -> str:
    parts = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp.types.ImageContent | mcp.types.AudioContent):
            parts.append(f"[{block.type}: {block.mimeType}, {len(block.data)} base64 chars]")
        elif isinstance(block, mcp.types.EmbeddedResource):
            resource = block.resource
            body = getattr(resource, "text", None)
            parts.append(body if body is not None else f"[resource {resource.uri}]")
        elif isinstance(block, mcp.types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    return "\n".join(parts)


def _schema_error(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(args))
    except jsonschema.exceptions.SchemaError as exc:
        return f"the server's input schema is invalid: {exc.message}"
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _is_transport_failure(exc: BaseException) -> bool:
    """A JSON-RPC error answer leaves the session usable; anything else means reconnect."""
    if isinstance(exc, mcp.McpError):
        return exc.error.code == mcp.types.CONNECTION_CLOSED
    return True


def _reason(exc: BaseException) -> str:
    """One readable line: the first leaf of an exception group, whitespace folded."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if type(exc).__name__ == "MCPTimeoutError":  # its later lines are generic advice
        return str(exc).splitlines()[0]
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def _start_reason(exc: BaseException) -> str:
    reason = _reason(exc)
    if reason == "Connection closed":  # all the SDK says when a stdio server exits at start
        return "the server exited during the MCP handshake (Connection closed); see its stderr"
    return reason


def _redact(text: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return text


def _close_client(client: MCPClient) -> None:
    # Closing is best effort: _kill makes sure nothing survives it.
    with contextlib.suppress(Exception):
        client.sync_close()


def _kill(procs: list[psutil.Process]) -> None:
    """SIGKILL each server's process group (mcp made each server a group leader). A server that
    already exited may have been reaped and its pid reused by an unrelated process (another
    jmp kernel among them): psutil's create-time check keeps such a pid untouched."""
    for proc in {p.pid: p for p in procs}.values():
        try:
            if not proc.is_running():
                continue
            pid = proc.pid
            if os.getpgid(pid) == pid and pid != os.getpgrp():
                os.killpg(pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.wait(timeout=CLOSE_TIMEOUT_S)
        except (ProcessLookupError, psutil.NoSuchProcess, psutil.TimeoutExpired, PermissionError):
            continue
