"""The server's stdio transport: bounded lines in, the SDK's messages out.

The `mcp` SDK's `stdio_server` reads stdin a text line at a time, however long the line gets
(a 300 MiB line: +303 MB of memory, then a pydantic failure it answers nothing to). Here a
line is read in chunks of at most CHUNK_BYTES and held only up to MAX_LINE_BYTES (the ACP
transport's cap, protocol/lines.py): a longer one is discarded up to its newline, never held
whole, and becomes an `Overlong` that the gate (gate.py) answers with -32600 Invalid Request,
with the request's id when it stands whole in the line's first ID_SCAN_BYTES. Then the next
line is read. Every other line is what the SDK's reader makes of it: a `SessionMessage`, or
the exception a line that is not JSON-RPC raises. Writing is the SDK's own way (one JSON line
per message, flushed; `encode`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import anyio.lowlevel
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic_core import from_json

from protocol.lines import MAX_LINE_BYTES

CHUNK_BYTES = 64 * 1024
ID_SCAN_BYTES = 4096  # of an over-long line, where its id is looked for


class Overlong(Exception):
    """A line of more than `limit` bytes, discarded; the id of the request it began, if that
    stands whole in its first bytes (SDKs write `jsonrpc`, `id`, `method` before `params`)."""

    def __init__(self, head: bytes, limit: int) -> None:
        super().__init__(
            f"Invalid Request: a line of more than {limit:,} bytes was discarded "
            f"(jev-harness-mcp reads JSON-RPC lines of up to {limit:,} bytes)"
        )
        self.request_id = request_id_of(head)


def request_id_of(head: bytes) -> Any:
    """The `id` of a JSON object's first bytes, when a member follows it (so that the cut did
    not fall inside it: `"id": 4` at the cut may be 45), and it is a string or an integer."""
    try:
        members = from_json(head, allow_partial=True)
    except ValueError:
        return None
    if not isinstance(members, dict) or "id" not in members:
        return None
    keys = list(members)
    found = members["id"]
    whole = keys.index("id") < len(keys) - 1
    usable = isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool))
    return found if whole and usable else None


class BoundedLines:
    """The lines of a binary stream, each at most `limit` bytes (without its newline) or an
    Overlong; the stream is read in chunks in a worker thread."""

    def __init__(self, stream: BinaryIO, limit: int = MAX_LINE_BYTES) -> None:
        self._stream = stream
        self._limit = limit
        self._buffer = bytearray()
        self._eof = False

    async def _fill(self) -> bool:
        """Read one more chunk into the buffer; False at EOF."""
        if self._eof:
            return False
        chunk = await anyio.to_thread.run_sync(self._read)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def _read(self) -> bytes:
        read1 = getattr(self._stream, "read1", None)
        return bytes(read1(CHUNK_BYTES) if read1 is not None else self._stream.read(CHUNK_BYTES))

    async def next(self) -> bytes | Overlong | None:
        """The next line (its newline dropped), an Overlong, or None at EOF."""
        scanned = 0
        while True:
            end = self._buffer.find(b"\n", scanned)
            if 0 <= end <= self._limit:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if end > self._limit or len(self._buffer) > self._limit:
                return await self._skip()
            scanned = len(self._buffer)
            if not await self._fill():
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None

    async def _skip(self) -> Overlong:
        """Discard the over-long line in the buffer up to and including its newline."""
        head = bytes(self._buffer[:ID_SCAN_BYTES])
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                del self._buffer[: end + 1]
                return Overlong(head, self._limit)
            self._buffer.clear()
            if not await self._fill():
                return Overlong(head, self._limit)


def encode(message: types.JSONRPCMessage) -> str:
    """The SDK's encoding of a message (None fields left out), but for an error to a request
    whose id could not be read: JSON-RPC gives it `"id": null`, which must stay."""
    root = message.root
    if isinstance(root, types.JSONRPCError) and root.id is None:
        error = root.error.model_dump(by_alias=True, exclude_none=True)
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":"))
    return message.model_dump_json(by_alias=True, exclude_none=True)


@asynccontextmanager
async def bounded_stdio(
    stdin: BinaryIO, stdout: anyio.AsyncFile[str]
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """`mcp.server.stdio.stdio_server`'s streams, over bounded lines of `stdin`."""
    read_writer, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    lines = BoundedLines(stdin)

    async def reader() -> None:
        try:
            async with read_writer:
                while (line := await lines.next()) is not None:
                    if isinstance(line, Overlong):
                        await read_writer.send(line)
                        continue
                    if not line.strip():
                        continue
                    try:
                        text = line.decode("utf-8", "replace")
                        message = types.JSONRPCMessage.model_validate_json(text)
                    except Exception as exc:
                        await read_writer.send(exc)
                        continue
                    await read_writer.send(SessionMessage(message))
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async def writer() -> None:
        try:
            async with write_reader:
                async for session_message in write_reader:
                    await stdout.write(encode(session_message.message) + "\n")
                    await stdout.flush()
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        yield read, write
