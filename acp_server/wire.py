"""`jmp --acp`'s stdio transport: bounded lines in, checked messages on, redacted messages out.

It fills the SDK's `Transport` seam (whole JSON-RPC messages between `Connection` and the
pipes) in place of the SDK's newline transport, which joins the pieces of an over-long line
however long it gets, logs a line that is not JSON and answers nothing, and hands a JSON line
that is not an object to a router that then dies with every session. Here a bad line gets the
JSON-RPC error that names it (acp_server/frames.py says which), is dropped, and the next line
is read; a line over MAX_LINE_BYTES is discarded up to its newline, never held whole.

Outgoing messages are redacted before they are encoded, string value by string value
(`frames.scrub`: never keys or protocol values). A message that belongs to a session (its
`sessionId`, or the reply to a request that named one) gets that session's redactor, which
knows the secrets its client supplied; any other gets the process's.

When the input ends (stdin EOF, or `end()` on SIGTERM) nothing is dropped: `on_end` stops the
runs, each request of ours still waiting for the client ends with a -32800 error (it cannot be
answered now), and the end is reported to the SDK only once every request the client sent has
its response (a cancelled prompt's last updates go before it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from acp_server.frames import (
    Redacts,
    Refused,
    check_message,
    decode,
    overlong,
    scrub,
)
from protocol.lines import MAX_LINE_BYTES

__all__ = ["MAX_LINE_BYTES", "StdioTransport"]

ID_SCAN_BYTES = 4096  # of an over-long line, where its id is looked for
REQUEST_CANCELLED = -32800  # the schema's code for a request that was cancelled


OPENERS = frozenset({"session/new", "session/load", "session/resume"})


class _Overlong:
    """A line that was discarded; its first bytes, to find its id."""

    def __init__(self, head: bytes) -> None:
        self.head = head


class StdioTransport:
    """The SDK's `Transport` over the stdio pipes (see the module docstring)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        redactor_for: Callable[[str | None], Redacts],
        max_line_bytes: int = MAX_LINE_BYTES,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        # Called once the response to a session/new, load or resume is written, with the
        # session's id: what an agent says about a session follows the answer that names it.
        self.on_opened: Callable[[str], None] | None = None
        self._reader = reader
        self._writer = writer
        self.redactor_for = redactor_for
        self.on_end = on_end
        self._max = max_line_bytes
        self._session_of: dict[tuple[str, Any], str] = {}  # request id -> its sessionId
        self._opening: set[tuple[str, Any]] = set()  # ids of session/new, load, resume
        self._closed = False
        self._inflight: set[tuple[str, Any]] = set()  # the client's requests not yet answered
        self._ours: dict[tuple[str, Any], Any] = {}  # our requests not yet answered: their ids
        self._changed = asyncio.Event()
        self._ending = asyncio.Event()
        self._ended = False
        self._reading: asyncio.Future[Any] | None = None
        self._pushed: deque[Any] = deque()  # messages (or pending receives) read ahead

    @property
    def ending(self) -> bool:
        return self._ending.is_set() or self._ended

    def end(self) -> None:
        """Stop reading (SIGTERM): the input is over, as at EOF."""
        self._ending.set()

    def push_back(self, item: Any) -> None:
        """A message read ahead (or the future of a `receive` still pending), given again by
        the next `receive` (acp_server/hello.py reads before the SDK is loaded)."""
        self._pushed.append(item)

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None once the input ended and every request in flight has its
        response. Bad lines are answered and skipped."""
        if self._pushed:
            item = self._pushed.popleft()
            pushed: dict[str, Any] | None = await item if isinstance(item, asyncio.Future) else item
            return pushed
        while True:
            line = await self._next_line()
            if line is None:
                return await self._drain()
            if isinstance(line, _Overlong):
                verdict = overlong(line.head, self._max)
                if isinstance(verdict, Refused):
                    await self._refuse(verdict)
                    continue
                logging.warning("discarded an over-long response from the client")
                self._remember(verdict)
                return verdict
            if not line.strip():
                continue
            try:
                message = check_message(decode(line))
            except Refused as refused:
                await self._refuse(refused)
                continue
            self._remember(message)
            return message

    async def send(self, message: dict[str, Any]) -> None:
        """Redact (with the session's redactor when the message belongs to one), encode, write."""
        key = _key(message.get("id"))
        answer = "method" not in message and "id" in message
        named = self._session_of.get(key) if answer else None  # `_session` forgets it
        if "method" in message and "id" in message:
            self._ours[key] = message["id"]
            self._changed.set()  # while draining, it ends at once: nobody can answer it
        try:
            redactor = self.redactor_for(self._session(message))
            data = json.dumps(scrub(message, redactor), separators=(",", ":")) + "\n"
            if self._closed:
                raise ConnectionError("the transport is closed")
            self._writer.write(data.encode("ascii"))  # json.dumps escapes all else: ASCII only
            await self._writer.drain()
        finally:
            if answer and key in self._inflight:
                self._inflight.discard(key)
                self._changed.set()
        if answer and key in self._opening:
            self._opening.discard(key)
            opened = self._opened_id(message, named)
            if opened is not None and self.on_opened is not None:
                self.on_opened(opened)

    @staticmethod
    def _opened_id(message: dict[str, Any], named: str | None) -> str | None:
        """The session a successful answer to session/new, load or resume opened."""
        result = message.get("result")
        if not isinstance(result, Mapping):
            return None
        opened = result.get("sessionId", named)
        return opened if isinstance(opened, str) else None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._changed.set()
        if self._reading is not None:
            self._reading.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()

    # --- internals ----------------------------------------------------------------------

    def _remember(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if "method" in message and "id" in message:
            self._inflight.add(_key(message["id"]))
            if message["method"] in OPENERS:
                self._opening.add(_key(message["id"]))
            if isinstance(params, Mapping) and isinstance(params.get("sessionId"), str):
                self._session_of[_key(message["id"])] = params["sessionId"]
        elif "id" in message:
            self._ours.pop(_key(message["id"]), None)

    async def _drain(self) -> dict[str, Any] | None:
        """After the input ended: first an error response for each request of ours still
        waiting (one per call), then None once every request of the client's is answered."""
        if not self._ended:
            self._ended = True
            if self.on_end is not None:
                self.on_end()
        while True:
            self._changed.clear()
            if self._ours:
                _, request_id = self._ours.popitem()
                message = "the client's input ended: this request was cancelled"
                error = {"code": REQUEST_CANCELLED, "message": message}
                return {"jsonrpc": "2.0", "id": request_id, "error": error}
            if not self._inflight or self._closed:
                return None
            await self._changed.wait()

    async def _next_line(self) -> bytes | _Overlong | None:
        """The next line, or None at EOF or once `end()` was called (a read under way is kept
        for the next call if it is interrupted)."""
        if self.ending:
            return None
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._line())
        ending = asyncio.ensure_future(self._ending.wait())
        try:
            await asyncio.wait({self._reading, ending}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ending.cancel()
        if not self._reading.done():
            return None
        reading, self._reading = self._reading, None
        return reading.result()  # type: ignore[no-any-return]

    def _session(self, message: dict[str, Any]) -> str | None:
        if "method" in message:
            params = message.get("params")
            session = params.get("sessionId") if isinstance(params, Mapping) else None
            return session if isinstance(session, str) else None
        return self._session_of.pop(_key(message.get("id")), None)

    async def _refuse(self, refused: Refused) -> None:
        logging.warning("refused a line from the client: %s", refused.message)
        reply = {
            "jsonrpc": "2.0",
            "id": refused.request_id,
            "error": {"code": refused.code, "message": refused.message},
        }
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.send(reply)

    async def _line(self) -> bytes | _Overlong | None:
        """The next line (None at EOF), or _Overlong once an over-long one is skipped whole."""
        reader = self._reader
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            return end.partial or None
        except asyncio.LimitOverrunError as over:
            head = await reader.readexactly(min(over.consumed, ID_SCAN_BYTES))
            await self._discard(over.consumed - len(head))
            return _Overlong(head)
        if len(line) > self._max + 1:  # the reader's limit is a little larger than ours
            return _Overlong(line[:ID_SCAN_BYTES])
        return line

    async def _discard(self, known: int) -> None:
        """Drop `known` buffered bytes, then everything up to and including the next newline."""
        reader = self._reader
        if known > 0:
            await reader.readexactly(known)
        while True:
            try:
                await reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as over:
                await reader.readexactly(max(1, over.consumed))
            except asyncio.IncompleteReadError:
                return  # the input ended inside the line


def _key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)  # 1 and "1" are different ids
