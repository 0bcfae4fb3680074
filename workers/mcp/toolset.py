"""MCP tools for the tool worker: OpenHands `create_mcp_tools`, one client per configured server.

Each server gets its own MCPClient (its own event loop thread), so one slow or dead server never
blocks another, and tool names stay the servers' own (the SDK prefixes them when several servers
share one client). How servers are launched and killed: workers/mcp/launch.py; how answers and
failures read: workers/mcp/results.py. A server that dies after a call was sent raises
`EffectUnknown`: the kernel records that call `tool_uncertain`, never `tool_finished`.

A stdio server that answers `initialize` with a JSON-RPC error (what a server of MCP 2026-07-28
alone does), or a Streamable HTTP server that refuses it (a JSON-RPC error, or HTTP 400, 404 or
405), is spoken to at that revision by workers/mcp/modern.py, which offers the same calls;
which revision each server got is in `.revisions`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp.types
from mcp.client.stdio import StdioServerParameters

if TYPE_CHECKING:  # OpenHands' package init pulls in litellm (seconds): loaded when a server starts
    from openhands.sdk.mcp.client import MCPClient

from protocol.mcp_config import (
    RemoteServer,
    ServerConfig,
    parse_servers,
    server_secrets,
)
from protocol.messages import ToolSpec
from protocol.redact import redact
from workers.mcp import launch, modern, results

TOOL_LIMIT = 250  # CONTRACT 10: advertised tools, the `recall` built-in included
MAX_MCP_TOOLS = TOOL_LIMIT - 1
CALL_TIMEOUT_S = 120.0
START_TIMEOUT_S = 30.0
POLL_S = 0.05  # how quickly a cancel Event is noticed during a call


class UnknownTool(LookupError):
    """No MCP tool of that name is offered."""


class EffectUnknown(Exception):
    """The server's connection died after the call was sent: whether it ran is unknown."""


@dataclass
class _Server:
    """One started server: its SDK client, the client's event loop, and its tools by their own
    (unprefixed) names."""

    name: str
    client: MCPClient | modern.ModernClient
    loop: asyncio.AbstractEventLoop
    tools: dict[str, mcp.types.Tool]
    revision: str = "initialize"  # or the stateless revision spoken, "2026-07-28"
    broken: bool = False  # a transport failure happened: reconnect before the next call
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Attempt:
    """One call's progress, set on the client's loop: True once the request is on its way."""

    sent: bool = False


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
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        futures = {
            name: pool.submit(_start, name, spec, token, start_timeout_s)
            for name, spec in servers.items()
        }
        quick: dict[str, Exception] = {}
        for name, future in futures.items():
            try:
                started[name] = future.result()
            except Exception as exc:
                if len(servers) > 1 and time.monotonic() - began < start_timeout_s / 2:
                    quick[name] = exc
                failed[name] = redact(results.start_reason(exc), secrets)
    # A server that failed fast beside others is tried once more alone: OpenHands' start of an
    # initialize-era server now and then fails ("MCP Connection Failure") while another
    # server's initialize is refused in parallel (seen in the suite, cause not found; DECISIONS).
    for name in quick:
        try:
            started[name] = _start(name, servers[name], token, start_timeout_s)
            del failed[name]
        except Exception as exc:
            failed[name] = redact(results.start_reason(exc), secrets)
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
        self._closing = False  # a call that close() cuts off is stopped, not lost
        self.revisions = {name: server.revision for name, server in servers.items()}
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
        error = results.schema_error(schema, args)
        if error is None:
            return dict(args), server.name
        # Generators often send null for an optional field they mean to leave out.
        required = set(schema.get("required", []))
        pruned = {k: v for k, v in args.items() if v is not None or k in required}
        if pruned != args and results.schema_error(schema, pruned) is None:
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
        (default 120 s) or a set `cancel`. An isError answer is status ok, marked in text.
        Raises EffectUnknown when the server's connection died after the call was sent."""
        server, tool = self._lookup(name)
        limit_s = timeout_s or CALL_TIMEOUT_S
        attempt = _Attempt()
        with server.lock:
            # A future of the client's own loop (public API only), so a cancel or a timeout
            # cancels the call's task instead of leaving it running.
            future = asyncio.run_coroutine_threadsafe(
                self._invoke(server, tool, args, attempt), server.loop
            )
            outcome = _wait(future, cancel, time.monotonic() + limit_s)
        if outcome == "cancelled":
            return results.failure(f"MCP call {name} cancelled")
        if outcome == "timeout":
            return results.failure(
                f"MCP call {name} timed out after {limit_s:g} s (server {server.name!r})"
            )
        try:
            result = future.result()
        except Exception as exc:
            transport = results.is_transport_failure(exc)
            server.broken = server.broken or transport
            reason = redact(results.reason(exc), self._secrets)
            if transport and attempt.sent and not self._closing:
                raise EffectUnknown(
                    f"MCP server {server.name!r} was lost during {tool} ({reason}); the call "
                    "had been sent, so whether it ran is unknown"
                ) from exc
            return results.failure(f"MCP server {server.name!r} failed during {tool}: {reason}")
        return results.success(server.name, result)

    async def _invoke(
        self, server: _Server, tool: str, args: dict[str, Any], attempt: _Attempt
    ) -> Any:
        if server.broken:  # the server died earlier: start it again once, for this call
            await server.client.close()
            await server.client.connect()
            server.broken = False
        attempt.sent = True
        return await server.client.call_tool_mcp(name=tool, arguments=args)

    def server_pids(self) -> list[int]:
        """Pids of the live stdio server processes this toolset started."""
        return [proc.pid for proc in launch.server_procs(self._token)]

    def close(self) -> None:
        """Stop every server; afterwards none of their processes is alive."""
        self._closing = True
        procs = launch.server_procs(self._token)
        closers = [
            threading.Thread(target=launch.close_client, args=(s.client,), daemon=True)
            for s in self._servers.values()
        ]
        for thread in closers:
            thread.start()
        deadline = time.monotonic() + launch.CLOSE_TIMEOUT_S
        for thread in closers:
            thread.join(max(0.0, deadline - time.monotonic()))
        launch.kill(procs + launch.server_procs(self._token))
        self._servers = {}
        self._by_name = {}

    def _lookup(self, name: str) -> tuple[_Server, str]:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownTool(f"unknown MCP tool {name!r}") from None


def _start(name: str, spec: ServerConfig, token: str, timeout_s: float) -> _Server:
    """Start one server through the SDK and list its tools; raises with a readable reason.

    A server that refuses `initialize` is spoken to at MCP 2026-07-28 (the revision's servers
    refuse the handshake): a stdio server is started again; a remote one is POSTed to at that
    revision. If it does not answer `server/discover` as a 2026-07-28 server, the handshake's
    failure is the reason given."""
    from openhands.sdk.mcp import create_mcp_tools

    deadline = time.monotonic() + timeout_s
    try:
        client = create_mcp_tools({name: launch.sdk_server(spec, token)}, timeout=timeout_s)
    except Exception as exc:
        if not _refused_initialize(spec, exc):
            raise
        try:
            return _start_modern(name, spec, token, max(1.0, deadline - time.monotonic()))
        except modern.NotModern:
            raise exc from None
    tools = {tool.mcp_tool.name: tool.mcp_tool for tool in client.tools}
    loop = client.call_async_from_sync(_running_loop, timeout=timeout_s)
    return _Server(name=name, client=client, loop=loop, tools=tools)


REFUSALS = (400, 404, 405)  # the statuses a 2026-07-28-only HTTP server can refuse initialize with


def _refused_initialize(spec: ServerConfig, exc: Exception) -> bool:
    """Whether the server answered `initialize` with a refusal a 2026-07-28 server gives: a
    JSON-RPC error, or over Streamable HTTP (not the old HTTP+SSE) HTTP 400, 404 or 405."""
    if results.rpc_error(exc) is not None:
        return not (isinstance(spec, RemoteServer) and launch.is_sse(spec))
    if isinstance(spec, RemoteServer) and not launch.is_sse(spec):
        return results.http_status(exc) in REFUSALS
    return False


def _start_modern(name: str, spec: ServerConfig, token: str, timeout_s: float) -> _Server:
    """Start one server at MCP 2026-07-28 (workers/mcp/modern.py) and list its tools."""
    if isinstance(spec, RemoteServer):
        target: modern.HttpTarget | StdioServerParameters = launch.http_target(spec)
    else:
        target = launch.stdio_params(spec, token)
    client = modern.ModernClient(target)
    try:
        client.start(timeout_s)
    except BaseException:
        client.sync_close()
        raise
    tools = {tool.name: tool for tool in client.tools}
    return _Server(name, client, client.loop, tools, revision=client.version)


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


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
