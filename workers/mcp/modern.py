"""jmp's client of MCP 2026-07-28 (stateless), for a server that refuses `initialize`.

OpenHands' client (fastmcp 3 over mcp 1.x) speaks only the `initialize` revisions, and the SDK
that speaks 2026-07-28 (mcp 2.x) cannot be installed beside it; so this client speaks that
revision's few frames itself. It offers what the toolset uses of OpenHands' `MCPClient`:
`connect`, `close`, `call_tool_mcp`, `sync_close`, on an event loop thread of its own (`loop`).

Two transports, one client: what it is given decides.
- `StdioServerParameters`: mcp 1.x's own stdio transport (`stdio_client`: the server in a
  session of its own, stdin closed then its group killed on close); answers are matched to
  requests by id, and a cancelled request is told to the server (`notifications/cancelled`).
- `HttpTarget` (a remote server's `url` and `headers`): the revision's Streamable HTTP binding,
  over mcp 1.x's own HTTP client (`create_mcp_http_client`, redirects only within the origin,
  as OpenHands' path): every request is its own POST with `Accept: application/json,
  text/event-stream` and the request metadata headers (`MCP-Protocol-Version`, `Mcp-Method`,
  `Mcp-Name` for `tools/call`, `Mcp-Param-*` for a tool's `x-mcp-header` parameters); the
  answer is one JSON object or an SSE stream whose notifications are skipped; a cancelled
  request closes its response stream, which is the cancellation on that transport. A tool whose
  `x-mcp-header` annotations break the revision's rules is left out (the revision says so).

The revision's negotiation (docs/MCP.md, "The revisions served"): every request carries the
`_meta` envelope naming its protocol version, jmp's identity and its (empty) capabilities;
`server/discover` first, which must list a version this client speaks; a request answered
-32022 is retried once at the newest version both sides list, else it fails naming the
server's versions. A server request is answered -32601 (a 2026-07-28 server sends none on
stdio); notifications are ignored. A cancelled call sends `notifications/cancelled`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import itertools
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import anyio
import httpx
import mcp
import mcp.types
from httpx_sse import EventSource
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared._httpx_utils import create_mcp_http_client, stream_within_origin
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


@dataclass(frozen=True)
class HttpTarget:
    """A remote server's endpoint and the headers of its config, sent with every request."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)


NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
HEADER_PARAM = "x-mcp-header"
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field-name token
_PLAIN = re.compile(r"[\x20-\x7e\t]*")  # a header value that needs no encoding
_SENTINEL = re.compile(r"=\?base64\?.*\?=", re.DOTALL)
_SAFE_INT = 2**53 - 1


class InvalidHeaderParam(ValueError):
    """A tool's `x-mcp-header` annotations break the revision's rules."""


def header_value(value: str) -> str:
    """`value` as a header value: as is when plain ASCII without edge whitespace and not
    sentinel-shaped, else `=?base64?<UTF-8 base64>?=` (Streamable HTTP, "Value Encoding")."""
    if _PLAIN.fullmatch(value) and value == value.strip() and not _SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def header_params(schema: Any) -> dict[tuple[str, ...], str]:
    """The `x-mcp-header` annotations of an input schema: property path -> header name part.
    Raises InvalidHeaderParam when one is not allowed (off a pure `properties` chain, not an
    RFC 9110 token, not on an integer/string/boolean property, or a case-insensitive repeat)."""
    found: dict[tuple[str, ...], str] = {}

    def walk(node: Any, path: tuple[str, ...] | None) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, None)
            return
        if not isinstance(node, dict):
            return
        if HEADER_PARAM in node:
            name = node[HEADER_PARAM]
            if not path:
                raise InvalidHeaderParam("an x-mcp-header off a pure `properties` chain")
            where = ".".join(path)
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise InvalidHeaderParam(f"{where}: x-mcp-header {name!r} is not a token")
            if node.get("type") not in ("string", "integer", "boolean"):
                raise InvalidHeaderParam(f"{where}: x-mcp-header on a {node.get('type')!r}")
            if name.lower() in {known.lower() for known in found.values()}:
                raise InvalidHeaderParam(f"{where}: x-mcp-header {name!r} is used twice")
            found[path] = name
        for key, value in node.items():
            if key == "properties" and path is not None and isinstance(value, dict):
                for prop, sub in value.items():
                    walk(sub, (*path, prop))
            elif key != HEADER_PARAM:
                walk(value, None)

    walk(schema, ())
    return found


def _param_headers(
    annotated: dict[tuple[str, ...], str], arguments: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    """The `Mcp-Param-*` headers a call mirrors: each annotated value present and not null."""
    for path, name in annotated.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int) and abs(value) <= _SAFE_INT:
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            continue  # not mirrorable: the server's validation of the body says so
        yield f"Mcp-Param-{name}", header_value(text)


class NotModern(Exception):
    """The server answered `server/discover` with something other than a 2026-07-28 answer."""


class ModernClient:
    """One server spoken to at MCP 2026-07-28, over stdio or Streamable HTTP (what `params`
    is); restartable (`close`, then `connect`)."""

    def __init__(self, params: StdioServerParameters | HttpTarget) -> None:
        self._params = params
        self.version = VERSIONS[-1]
        self.tools: list[mcp.types.Tool] = []
        self.left_out: dict[str, str] = {}  # tools not offered (HTTP): why
        self._annotated: dict[str, dict[tuple[str, ...], str]] = {}  # tool -> x-mcp-header
        self._http: httpx.AsyncClient | None = None  # the HTTP client while connected
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
        except httpx.HTTPError as exc:  # no JSON-RPC answer at all over HTTP
            raise NotModern(f"server/discover failed: {exc}") from exc
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
        self.tools, self.left_out, self._annotated = [], {}, {}
        for tool in tools:
            try:
                annotated = header_params(tool.inputSchema) if self._over_http else {}
            except InvalidHeaderParam as exc:
                self.left_out[tool.name] = str(exc)
                continue
            self.tools.append(tool)
            self._annotated[tool.name] = annotated

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

    @property
    def _over_http(self) -> bool:
        return isinstance(self._params, HttpTarget)

    async def _run(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """Own the transport from start to close; a failed start goes to `ready`."""
        try:
            if isinstance(self._params, HttpTarget):
                async with create_mcp_http_client(headers=dict(self._params.headers)) as http:
                    self._http = http
                    ready.set_result(None)
                    await stop.wait()
                return
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
            self._http = None
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
        if self._over_http:  # a cancel closes the response stream: that is the cancellation
            return await self._post(frame)
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

    async def _post(self, frame: dict[str, Any]) -> dict[str, Any]:
        """One request as its own POST; its answer, from a JSON body or an SSE stream. A 3xx or
        4xx status without a JSON-RPC answer is an error answer (the request was refused); a
        5xx without one, or a stream that ends unanswered, is a transport failure."""
        if self._http is None or not isinstance(self._params, HttpTarget):
            raise _closed()
        method, params = frame["method"], frame["params"]
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.version,
            "Mcp-Method": method,
        }
        if isinstance(params.get(NAME_PARAMS.get(method, "")), str):
            headers["Mcp-Name"] = header_value(params[NAME_PARAMS[method]])
        if method == "tools/call":
            annotated = self._annotated.get(params["name"], {})
            headers.update(_param_headers(annotated, params.get("arguments") or {}))
        post = stream_within_origin(
            self._http, "POST", self._params.url, json=frame, headers=headers
        )
        async with post as response:
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == "text/event-stream":
                async for event in EventSource(response).aiter_sse():
                    answer = _answer(event.data, frame["id"])
                    if answer is not None:
                        return answer
                raise _closed()
            body = await response.aread()
            answer = _answer(body, frame["id"]) if kind == "application/json" else None
            if answer is not None:
                return answer
            if 300 <= response.status_code < 500:
                message = f"HTTP {response.status_code} {response.reason_phrase} to {method}"
                error = mcp.types.ErrorData(code=mcp.types.INTERNAL_ERROR, message=message)
                raise mcp.McpError(error)
            response.raise_for_status()
            raise _closed()  # a 2xx that is not an answer: treat as a lost connection


def _answer(data: str | bytes, request_id: int) -> dict[str, Any] | None:
    """The JSON-RPC response or error to `request_id` in `data`, if that is what it holds."""
    try:
        frame = json.loads(data)
    except ValueError:
        return None
    if not isinstance(frame, dict) or "method" in frame:
        return None  # a notification (or a request a server must not send here): skipped
    if ("result" in frame or "error" in frame) and frame.get("id") in (request_id, None):
        return frame
    return None
