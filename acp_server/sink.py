"""A session's `on_event` subscriber: its events as updates, sent from the run's thread.

The send blocks that thread until the event loop has written the update, so a turn's updates
keep log order and all precede the prompt's response; it gives up when the connection is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TYPE_CHECKING

from acp_server.updates import Translator, Update
from protocol.events import Event

if TYPE_CHECKING:
    from acp_server.server import JmpAcpAgent
    from acp_server.sessions import Handle

SEND_POLL_S = 1.0  # how often a blocked send looks whether the connection went away


class Sink:
    """Translate, then send (blocking) from the run thread; silent until bound to its handle."""

    def __init__(self, server: JmpAcpAgent) -> None:
        self.server = server
        self.handle: Handle | None = None
        self.translator: Translator | None = None

    def bind(self, handle: Handle) -> Translator:
        session = handle.session
        self.translator = Translator(session.workspace, session.artifacts.read_text)
        self.handle = handle
        return self.translator

    def __call__(self, event: Event) -> None:
        if self.handle is None or self.translator is None:
            return  # events while opening (the session record, a torn-line error)
        for update in self.translator.live(event):
            self.send(self.handle, update)

    def send(self, handle: Handle, update: Update) -> None:
        server = self.server
        loop = server.loop
        if loop is None or server.closed:
            return
        if _on_loop(loop):  # never block the loop on itself
            loop.create_task(server.send_update(handle, update))
            return
        future = asyncio.run_coroutine_threadsafe(server.send_update(handle, update), loop)
        while True:
            try:
                future.result(timeout=SEND_POLL_S)
                return
            except concurrent.futures.TimeoutError:
                if server.closed:
                    future.cancel()
                    return
            except (ConnectionError, concurrent.futures.CancelledError, RuntimeError):
                return


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
