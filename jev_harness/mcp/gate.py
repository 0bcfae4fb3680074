"""What reaches the `mcp` SDK's server session, and the answers it would get wrong.

The SDK (1.x) speaks the handshake revisions of MCP (`initialize`, 2024-11-05 to 2025-11-25;
jmp cannot take the 2.x SDK: OpenHands pins fastmcp < 4, hence mcp < 2). It answers every
request it cannot parse with -32602 "Invalid request parameters" and logs the whole pydantic
failure at WARNING (96 lines for one `server/discover`). Clients of the stateless revision
(2026-07-28, the mcp 2.x SDK and fastmcp 4) probe with `server/discover` first and fall back to
`initialize` on any error that is not a modern one (MCP 2026-07-28, stdio "Backward
Compatibility"): the probe must get a plain, deterministic error, and stderr stays quiet.

So each request is screened before the SDK sees it; the gate answers, itself and in one line:

- a method this server does not serve (`server/discover` included): -32601 Method not found,
  naming the revisions it speaks and that `initialize` opens a session;
- a request before `initialize` (other than `ping`): -32600, saying `initialize` comes first;
- a request of a known method that does not parse: -32602 naming the method and the first
  problem (never the value sent);
- a line over the cap (stdio.py `Overlong`, discarded unread): -32600 Invalid Request, as
  `jmp --acp` answers one, with the request's id when its first bytes hold it (else null).

Everything else passes unchanged; the SDK's `initialize` already answers a revision it
supports (the client's when it is one of them, else its latest), as the lifecycle requires.
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
    """Screens one connection's requests; `answer(message)` is the reply the gate gives."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.initialized = False

    def answer(self, message: SessionMessage | Exception) -> SessionMessage | None:
        """The gate's own reply to `message`, or None to pass it on to the SDK."""
        if isinstance(message, Overlong):
            self.say(str(message))
            return _error(message.request_id, types.INVALID_REQUEST, str(message))
        if isinstance(message, Exception):
            return None  # a line that is not JSON-RPC: the SDK's own handling
        request = message.message.root
        if not isinstance(request, types.JSONRPCRequest):
            return None
        method = request.method
        if method not in REQUESTS:
            return _error(request.id, types.METHOD_NOT_FOUND, NOT_FOUND)
        if not self.initialized and method not in ("initialize", "ping"):
            text = f"send initialize first (MCP {', '.join(REVISIONS)}); {method} came before it"
            return _error(request.id, types.INVALID_REQUEST, text)
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
        if method == "initialize":
            self.initialized = True  # the SDK answers it, and everything after it
        return None


def _error(request_id: Any, code: int, message: str) -> SessionMessage:
    """The error response; `request_id` None is JSON-RPC's null id (a request whose id could
    not be read), which the SDK's type does not allow, so it is set past validation."""
    data = types.ErrorData(code=code, message=message)
    if request_id is None:
        error = types.JSONRPCError.model_construct(jsonrpc="2.0", id=None, error=data)
    else:
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=data)
    return SessionMessage(message=types.JSONRPCMessage(error))


@asynccontextmanager
async def screened(
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
    say: Callable[[str], None],
) -> AsyncIterator[MemoryObjectReceiveStream[SessionMessage | Exception]]:
    """The read stream the SDK's server gets: `read` less what the gate answers on `write`."""
    gate = Gate(say)
    passed, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        async with passed, read:
            async for message in read:
                reply = gate.answer(message)
                try:
                    if reply is None:
                        await passed.send(message)
                    else:
                        await write.send(reply)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session is over: nobody is listening any more

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            yield receive
        finally:
            tg.cancel_scope.cancel()
