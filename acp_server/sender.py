"""The editor's connection as the parts of the server use it: the client once connected, its
event loop, whether the server is closing, and one update sent, from the loop or from a thread.

The session table (acp_server/table.py), the sinks (acp_server/sink.py), the approver
(acp_server/modes.py) and the interrupted-call question (acp_server/permission.py) each get this
object, not the server: what they may do with the connection is what it offers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acp.interfaces import Client

    from acp_server.updates import Update

SEND_POLL_S = 1.0  # how often a blocked send looks whether the connection went away


class Sender:
    """Sends updates to the client; silent before `connect` and once `closed`."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def connect(self, conn: Client) -> None:
        """The SDK's connection, on its event loop."""
        self.client = conn
        self.loop = asyncio.get_running_loop()

    async def send_update(self, session_id: str, update: Update) -> None:
        """One update; the transport redacts it with the session's redactor."""
        if self.client is None or self.closed:
            return
        await self.client.session_update(session_id=session_id, update=update)

    def send(self, session_id: str, update: Update) -> None:
        """One update from any thread: blocks a thread until the loop has written it (so a
        turn's updates all precede the prompt's response); on the loop itself it is scheduled,
        never awaited. Gives up when the connection is gone or the server closes."""
        loop = self.loop
        if loop is None or self.closed:
            return
        if _on_loop(loop):  # never block the loop on itself
            loop.create_task(self.send_update(session_id, update))
            return
        future = asyncio.run_coroutine_threadsafe(self.send_update(session_id, update), loop)
        while True:
            try:
                future.result(timeout=SEND_POLL_S)
                return
            except concurrent.futures.TimeoutError:
                if self.closed:
                    future.cancel()
                    return
            except (ConnectionError, concurrent.futures.CancelledError, RuntimeError):
                return


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
