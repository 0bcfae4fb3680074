"""What reaches the `mcp` SDK's server session, and the answers it would get wrong: both eras.

The SDK (1.x) speaks the handshake revisions of MCP (`initialize`, 2024-11-05 to 2025-11-25;
jmp cannot take the 2.x SDK: OpenHands pins fastmcp < 4, hence mcp < 2). The stateless
revision, 2026-07-28, is served here, in front of it (MCP 2026-07-28, versioning "Backward
Compatibility with Initialization-Based Versions": a dual-era server). The client's first
request decides a connection's era, once, as the 2.x SDK's `serve_dual_era_loop` decides it:

- **modern** when it is not `initialize` and its `params._meta` carries
  `io.modelcontextprotocol/protocolVersion`. Every request is then checked as the revision
  says (the envelope keys, else -32602; a version other than 2026-07-28, -32022
  UnsupportedProtocolVersionError with `supported` and `requested`); `server/discover` is
  answered here; `ping`, `tools/list` and `tools/call` go to the SDK, which this gate opened
  once with an `initialize` of its own (its answer never leaves); `initialize` is -32022;
  anything else -32601. Every result gets `resultType: "complete"`, and the cacheable ones
  (`server/discover`, `tools/list`) `ttlMs` and `cacheScope`.
- **legacy** otherwise, as before: a method this server does not serve (`server/discover`
  without the envelope included): -32601 naming the revisions; a request before `initialize`
  (other than `ping`): -32600; a later request carrying the envelope: -32600.

On both: a request of a known method that does not parse is -32602 naming the method and the
first problem (never the value sent); a line over the cap (stdio.py `Overlong`, discarded
unread) is -32600 Invalid Request, as `jmp --acp` answers one, with the request's id when its
first bytes hold it (else null). `notifications/cancelled` is passed on (the SDK cancels the
handler) and told to `on_cancel`; nothing more is sent for that request, its response
included (MCP 2026-07-28 stdio "Cancellation": MUST NOT send any further messages for it).
"""

from __future__ import annotations

import typing
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
import pydantic
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS

from jev_harness.mcp.stdio import Overlong

MODERN = ("2026-07-28",)  # the stateless revisions served (no initialize)
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_KEY = "io.modelcontextprotocol/serverInfo"
UNSUPPORTED_PROTOCOL_VERSION = -32022
MODERN_METHODS = ("ping", "tools/list", "tools/call")  # the SDK answers these; discover is ours
CACHEABLE = ("server/discover", "tools/list")
Incoming = MemoryObjectReceiveStream[SessionMessage | Exception]
OPENING = "jev-harness-gate/initialize"  # the id of the gate's own initialize (modern era)


def _requests() -> dict[str, type[pydantic.BaseModel]]:
    union = types.ClientRequest.model_fields["root"].annotation
    found = {}
    for request in typing.get_args(union):
        for method in typing.get_args(request.model_fields["method"].annotation):
            found[method] = request
    return found


REQUESTS = _requests()  # every request method the SDK's server session parses, and its type
REVISIONS = tuple(SUPPORTED_PROTOCOL_VERSIONS)  # what `initialize` can agree on, oldest first
NOT_FOUND = (
    f"Method not found; this server speaks MCP {', '.join(REVISIONS)}: "
    "open a session with initialize"
)


class Gate:
    """Screens one connection's frames both ways.

    `answer(message)` is the gate's own reply to a client frame (None: pass it on to the SDK,
    after `opening()` when that is not None); `outgoing(message)` is what of the SDK's frame
    reaches the client (None: nothing)."""

    def __init__(
        self,
        say: Callable[[str], None],
        describe: Callable[[], dict[str, Any]] | None = None,
        on_cancel: Callable[[Any], None] | None = None,
    ) -> None:
        self.say = say
        self.describe = describe or (lambda: {})  # server/discover's capabilities, ...
        self.on_cancel = on_cancel or (lambda _id: None)
        self.era: str | None = None  # "legacy" or "modern", set by the first request
        self.initialized = False
        self.cancelled: set[Any] = set()  # request ids: nothing more is sent for them
        self.modern_methods: dict[Any, str] = {}  # modern request id -> method, until answered
        self.open_sdk = False  # modern: the SDK still has to be opened (our own initialize)
        self.envelope: dict[str, Any] = {}  # the request's `_meta` that opened it
        self.tokens: dict[Any, Any] = {}  # request id -> its progressToken
        self.cancelled_tokens: set[Any] = set()  # progress never sent again for these

    def answer(self, message: SessionMessage | Exception) -> SessionMessage | None:
        """The gate's own reply to `message`, or None to pass it on to the SDK."""
        if isinstance(message, Overlong):
            self.say(str(message))
            return _error(message.request_id, types.INVALID_REQUEST, str(message))
        if isinstance(message, Exception):
            return None  # a line that is not JSON-RPC: the SDK's own handling
        frame = message.message.root
        if isinstance(frame, types.JSONRPCNotification):
            if frame.method == "notifications/cancelled" and isinstance(frame.params, dict):
                ident = frame.params.get("requestId")
                if ident is not None:
                    self.cancelled.add(ident)
                    if ident in self.tokens:
                        self.cancelled_tokens.add(self.tokens[ident])
                    self.on_cancel(ident)
            return None
        if not isinstance(frame, types.JSONRPCRequest):
            return None
        meta = request_meta(frame.params)
        if "progressToken" in meta:
            self.tokens[frame.id] = meta["progressToken"]
        if self.era is None:
            modern = frame.method != "initialize" and _enveloped(frame.params)
            self.era = "modern" if modern else "legacy"
        if self.era == "modern":
            return self._modern(frame)
        return self._legacy(frame)

    def _modern(self, request: types.JSONRPCRequest) -> SessionMessage | None:
        method, params = request.method, request.params or {}
        if method == "initialize":
            requested = params.get("protocolVersion")
            text = f"this connection serves MCP {', '.join(MODERN)}: initialize is not accepted"
            data: dict[str, Any] = {"supported": list(MODERN)}
            if isinstance(requested, str):
                data["requested"] = requested
            return _error(request.id, UNSUPPORTED_PROTOCOL_VERSION, text, data)
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            text = f"params._meta must be an object carrying {VERSION_KEY} and {CAPABILITIES_KEY}"
            return _error(request.id, types.INVALID_PARAMS, text)
        if missing := [k for k in (VERSION_KEY, CAPABILITIES_KEY) if k not in meta]:
            text = f"params._meta is missing the required envelope key(s): {', '.join(missing)}"
            return _error(request.id, types.INVALID_PARAMS, text)
        version = meta[VERSION_KEY]
        if not isinstance(version, str):
            return _error(request.id, types.INVALID_PARAMS, f"{VERSION_KEY} must be a string")
        if version not in MODERN:
            data = {"supported": list(MODERN), "requested": version}  # the -32022 data
            text = "Unsupported protocol version"
            return _error(request.id, UNSUPPORTED_PROTOCOL_VERSION, text, data)
        if method == "server/discover":
            return _result(request.id, self._discover(), cacheable=True)
        if method not in MODERN_METHODS:
            served = ", ".join((*MODERN_METHODS, "server/discover"))
            text = f"Method not found; at MCP {', '.join(MODERN)} this server serves {served}"
            return _error(request.id, types.METHOD_NOT_FOUND, text)
        if failed := self._unparsed(request):
            return failed
        if not self.initialized:
            self.initialized, self.open_sdk, self.envelope = True, True, meta
        self.modern_methods[request.id] = method
        return None

    def opening(self) -> list[SessionMessage]:
        """The SDK's opening for a modern connection (once): initialize, then initialized."""
        if not self.open_sdk:
            return []
        self.open_sdk = False
        client = self.envelope.get(CLIENT_KEY)
        if not (isinstance(client, dict) and isinstance(client.get("name"), str)):
            client = {"name": "mcp-2026-07-28-client", "version": "0"}
        initialize = types.JSONRPCRequest(
            jsonrpc="2.0",
            id=OPENING,
            method="initialize",
            params={
                "protocolVersion": REVISIONS[-1],
                "capabilities": {},
                "clientInfo": {
                    "name": str(client["name"]),
                    "version": str(client.get("version", "0")),
                },
            },
        )
        initialized = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
        return [
            SessionMessage(message=types.JSONRPCMessage(initialize)),
            SessionMessage(message=types.JSONRPCMessage(initialized)),
        ]

    def _discover(self) -> dict[str, Any]:
        described = self.describe()
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN),
            "capabilities": described.get("capabilities", {"tools": {}}),
        }
        if described.get("instructions"):
            result["instructions"] = described["instructions"]
        if described.get("serverInfo"):
            result["_meta"] = {SERVER_KEY: described["serverInfo"]}
        return result

    def outgoing(self, message: SessionMessage) -> SessionMessage | None:
        """The SDK's frame as the client gets it, or None when nothing may be sent."""
        frame = message.message.root
        if isinstance(frame, (types.JSONRPCResponse, types.JSONRPCError)):
            if frame.id == OPENING:
                return None  # the answer to the gate's own initialize
            method = self.modern_methods.pop(frame.id, None)
            if frame.id in self.cancelled:
                self.cancelled.discard(frame.id)
                return None  # cancelled: no response (the SDK sends one)
            if method is not None and isinstance(frame, types.JSONRPCResponse):
                return _result(frame.id, frame.result, cacheable=method in CACHEABLE)
            return message
        progress = isinstance(frame, types.JSONRPCNotification) and (
            frame.method == "notifications/progress"
        )
        if progress and request_meta({"_meta": frame.params}).get("progressToken") in (
            self.cancelled_tokens
        ):
            return None  # a cancelled request's: nothing more is sent for it
        return message

    def _legacy(self, request: types.JSONRPCRequest) -> SessionMessage | None:
        method = request.method
        if method not in REQUESTS:
            return _error(request.id, types.METHOD_NOT_FOUND, NOT_FOUND)
        if not self.initialized and method not in ("initialize", "ping"):
            text = f"send initialize first (MCP {', '.join(REVISIONS)}); {method} came before it"
            return _error(request.id, types.INVALID_REQUEST, text)
        if method != "initialize" and _enveloped(request.params):
            text = (
                "this connection serves the initialize revisions "
                f"(MCP {', '.join(REVISIONS)}); a request carrying the {MODERN[0]} envelope is "
                "not accepted on it"
            )
            return _error(request.id, types.INVALID_REQUEST, text)
        if failed := self._unparsed(request):
            return failed
        if method == "initialize":
            self.initialized = True  # the SDK answers it, and everything after it
        return None

    def _unparsed(self, request: types.JSONRPCRequest) -> SessionMessage | None:
        """-32602 for a request of a known method that does not parse, else None."""
        method = request.method
        try:
            REQUESTS[method].model_validate(
                request.model_dump(by_alias=True, mode="json", exclude_none=True)
            )
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "params"
            self.say(f"refused a {method} request: {where}: {first.get('msg')}")
            text = f"Invalid params for {method}: {where}: {first.get('msg')}"
            return _error(request.id, types.INVALID_PARAMS, text)
        return None


def request_meta(params: Any) -> dict[str, Any]:
    """A request's `_meta` ({} when it has none, or not an object)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def _enveloped(params: Any) -> bool:
    """Whether a request carries the 2026-07-28 envelope (its `_meta` protocol version key)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_KEY in meta


def _result(request_id: Any, result: dict[str, Any], *, cacheable: bool) -> SessionMessage:
    """A 2026-07-28 result: `resultType`, and for a cacheable one its caching hints (fresh
    for no time, this client's only: the tools depend on how this process was started)."""
    body = {**result, "resultType": "complete"}
    if cacheable:
        body.setdefault("ttlMs", 0)
        body.setdefault("cacheScope", "private")
    response = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=body)
    return SessionMessage(message=types.JSONRPCMessage(response))


def _error(request_id: Any, code: int, message: str, data: Any = None) -> SessionMessage:
    """The error response; `request_id` None is JSON-RPC's null id (a request whose id could
    not be read), which the SDK's type does not allow, so it is set past validation."""
    data = types.ErrorData(code=code, message=message, data=data)
    if request_id is None:
        error = types.JSONRPCError.model_construct(jsonrpc="2.0", id=None, error=data)
    else:
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=data)
    return SessionMessage(message=types.JSONRPCMessage(error))


@asynccontextmanager
async def screened(
    read: Incoming, write: MemoryObjectSendStream[SessionMessage], gate: Gate
) -> AsyncIterator[tuple[Incoming, MemoryObjectSendStream[SessionMessage]]]:
    """The streams the SDK's server gets: `read` less what `gate` answers itself, and a write
    stream whose frames reach `write` as `gate.outgoing` lets them."""
    passed, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    sdk_write, sdk_frames = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump() -> None:
        async with passed, read:
            async for message in read:
                reply = gate.answer(message)
                try:
                    if reply is None:
                        for opening in gate.opening():
                            await passed.send(opening)
                        await passed.send(message)
                    else:
                        await write.send(reply)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session is over: nobody is listening any more

    async def out() -> None:
        async with sdk_frames, write:  # the SDK closes its stream at the end: so is `write`
            async for message in sdk_frames:
                sent = gate.outgoing(message)
                if sent is None:
                    continue
                try:
                    await write.send(sent)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        tg.start_soon(out)
        try:
            yield receive, sdk_write
        finally:
            tg.cancel_scope.cancel()
