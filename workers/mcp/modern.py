"""jmp's client of MCP 2026-07-28 (stateless) over stdio, for a server that refuses `initialize`.

OpenHands' client (fastmcp 3 over mcp 1.x) speaks only the `initialize` revisions, and the SDK
that speaks 2026-07-28 (mcp 2.x) cannot be installed beside it; so this client speaks that
revision's few frames itself, over mcp 1.x's own stdio transport (`stdio_client`: the server in
a session of its own, stdin closed then its group killed on close). It offers what the toolset
uses of OpenHands' `MCPClient`: `connect`, `close`, `call_tool_mcp`, `sync_close`, on an event
loop thread of its own (`loop`).

The revision's negotiation (docs/MCP.md, "The revisions served"): every request carries the
`_meta` envelope naming its protocol version, jmp's identity and its (empty) capabilities;
`server/discover` first, which must list a version this client speaks; a request answered
-32022 is retried once at the newest version both sides list, else it fails naming the
server's versions. A server request is answered -32601 (a 2026-07-28 server sends none on
stdio); notifications are ignored. A cancelled call sends `notifications/cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
from importlib import metadata
from typing import Any

import anyio
import mcp
import mcp.types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

VERSIONS = ("2026-07-28",)  # the stateless revisions this client speaks, oldest first
UNSUPPORTED_PROTOCOL_VERSION = -32022
META = "io.modelcontextprotocol/"
CLOSE_TIMEOUT_S = 10.0


@functools.cache
def _client_info() -> dict[str, str]:
    try:
        version = metadata.version("jmp-agent")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"name": "jmp", "version": version}


def _closed() -> mcp.McpError:
    """What a call reads when the server's stdout ended: a transport failure (results.py)."""
    error = mcp.types.ErrorData(code=mcp.types.CONNECTION_CLOSED, message="Connection closed")
    return mcp.McpError(error)


def newest_mutual(error: mcp.types.ErrorData) -> str | None:
    """The newest version this client speaks among those a -32022 answer lists, if any."""
    data = error.data if isinstance(error.data, dict) else {}
    supported = data.get("supported")
    listed = supported if isinstance(supported, list) else []
    mutual = [v for v in VERSIONS if v in listed]
    return mutual[-1] if mutual else None


def unsupported_reason(error: mcp.types.ErrorData) -> str:
    """A -32022 answer with no version in common, in words."""
    data = error.data if isinstance(error.data, dict) else {}
    theirs = ", ".join(str(v) for v in data.get("supported") or []) or "none named"
    return (
        f"the server serves MCP {theirs}; jmp's client speaks {', '.join(VERSIONS)} and the "
        "initialize revisions 2024-11-05 to 2025-11-25"
    )


class NotModern(Exception):
    """The server answered `server/discover` with something other than a 2026-07-28 answer."""


class ModernClient:
    """One stdio server spoken to at MCP 2026-07-28; restartable (`close`, then `connect`)."""

    def __init__(self, params: StdioServerParameters) -> None:
        self._params = params
        self.version = VERSIONS[-1]
        self.tools: list[mcp.types.Tool] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._write: Any = None  # the transport's send stream while connected
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()  # cancellation notices on their way
        self._closed = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="mcp-2026-07-28", daemon=True
        )
        self._thread.start()

    def start(self, timeout_s: float) -> None:
        """Connect from another thread: discover, negotiate, list the tools; raises on failure."""
        future = asyncio.run_coroutine_threadsafe(self.connect(), self.loop)
        try:
            future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"no 2026-07-28 answer within {timeout_s:g} s") from None

    async def connect(self) -> None:
        """Start the server, `server/discover` it and list its tools (every page)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.ensure_future(self._run(ready, self._stop))
        await ready
        try:
            found = await self._request("server/discover", {})
        except mcp.McpError as exc:  # any answer but -32022 says: not a 2026-07-28 server
            if exc.error.code == UNSUPPORTED_PROTOCOL_VERSION:
                raise
            raise NotModern(f"server/discover answered {exc.error.message}") from exc
        supported = found.get("supportedVersions")
        mutual = [v for v in VERSIONS if isinstance(supported, list) and v in supported]
        if not mutual:
            raise NotModern(f"server/discover listed no version jmp speaks: {supported!r}")
        self.version = mutual[-1]
        tools: list[mcp.types.Tool] = []
        cursor: str | None = None
        while True:
            page = await self._request("tools/list", {"cursor": cursor} if cursor else {})
            listed = mcp.types.ListToolsResult.model_validate(page)
            tools += listed.tools
            cursor = listed.nextCursor
            if not cursor:
                break
        self.tools = tools

    async def call_tool_mcp(self, name: str, arguments: dict[str, Any]) -> mcp.types.CallToolResult:
        """One `tools/call`; an `input_required` answer (which jmp cannot give) is an error."""
        result = await self._request("tools/call", {"name": name, "arguments": arguments})
        if result.get("resultType", "complete") != "complete":
            message = f"the server answered resultType {result.get('resultType')!r}, which jmp's "
            message += "client does not take up (it asks the user for nothing)"
            raise mcp.McpError(mcp.types.ErrorData(code=mcp.types.INTERNAL_ERROR, message=message))
        return mcp.types.CallToolResult.model_validate(result)

    async def close(self) -> None:
        """Close stdin, wait 2 s for the server, then kill its group (mcp's stdio_client)."""
        if self._stop is not None:
            self._stop.set()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await self._task
        self._task = None

    def sync_close(self) -> None:
        """Close from another thread, then end the loop thread. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.close(), self.loop).result(CLOSE_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()

    async def _run(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """Own the transport from start to close; a failed start goes to `ready`."""
        try:
            async with stdio_client(self._params) as (read, write):
                self._write = write
                reader = asyncio.ensure_future(self._read(read))
                ready.set_result(None)
                try:
                    await stop.wait()
                finally:
                    reader.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
        finally:
            self._write = None
            self._fail_pending()

    async def _read(self, read: Any) -> None:
        """Answers to their requests; a server request gets -32601; the end fails the rest."""
        try:
            async for item in read:
                if not isinstance(item, SessionMessage):
                    continue  # a line that was not JSON-RPC: nothing to answer
                frame = item.message.root
                if isinstance(frame, mcp.types.JSONRPCResponse | mcp.types.JSONRPCError):
                    waiter = self._pending.get(frame.id) if isinstance(frame.id, int) else None
                    if waiter is not None and not waiter.done():
                        waiter.set_result(frame.model_dump(by_alias=True, exclude_none=True))
                elif isinstance(frame, mcp.types.JSONRPCRequest):
                    error = {"code": mcp.types.METHOD_NOT_FOUND, "message": "not supported"}
                    await self._send({"jsonrpc": "2.0", "id": frame.id, "error": error})
        except (anyio.ClosedResourceError, anyio.EndOfStream):
            pass
        finally:
            self._fail_pending()

    def _fail_pending(self) -> None:
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(_closed())

    async def _send(self, frame: dict[str, Any]) -> None:
        if self._write is None:
            raise _closed()
        message = mcp.types.JSONRPCMessage.model_validate(frame)
        try:
            await self._write.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise _closed() from None

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request with the envelope; -32022 retried once at a version both list."""
        for attempt in range(2):
            answer = await self._exchange(method, params)
            if "error" not in answer:
                result = answer.get("result")
                return result if isinstance(result, dict) else {}
            error = mcp.types.ErrorData.model_validate(answer["error"])
            if error.code == UNSUPPORTED_PROTOCOL_VERSION:
                version = newest_mutual(error)
                if version is not None and version != self.version and attempt == 0:
                    self.version = version
                    continue
                error = error.model_copy(update={"message": unsupported_reason(error)})
            raise mcp.McpError(error)
        raise AssertionError("unreachable")

    async def _exchange(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its answer; a cancel tells the server."""
        envelope = {
            f"{META}protocolVersion": self.version,
            f"{META}clientInfo": _client_info(),
            f"{META}clientCapabilities": {},
        }
        request_id = next(self._ids)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method}
        frame["params"] = {**params, "_meta": envelope}
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = waiter
        try:
            await self._send(frame)
            return await waiter
        except asyncio.CancelledError:
            chore = asyncio.ensure_future(self._cancelled(request_id))
            self._chores.add(chore)
            chore.add_done_callback(self._chores.discard)
            raise
        finally:
            self._pending.pop(request_id, None)

    async def _cancelled(self, request_id: int) -> None:
        notice = {"requestId": request_id, "reason": "cancelled by jmp"}
        frame = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": notice}
        with contextlib.suppress(Exception):
            await self._send(frame)
