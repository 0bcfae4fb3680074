"""The sessions this process serves, by id, and the one way the event loop runs kernel work:
in a worker thread, with kernel errors turned into JSON-RPC errors redacted for the session.

The session methods (acp_server/session_methods.py) and the prompt (acp_server/server.py) both
use it; neither reaches into the other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from acp import RequestError

from acp_server.errors import NOT_FOUND, as_request_error

if TYPE_CHECKING:
    from acp_server.config import Config
    from acp_server.sessions import Handle
    from kernel.store.redact import Redactor

T = TypeVar("T")


class SessionTable:
    """Open sessions (`handles`) and the thread pool their kernel calls run in."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.handles: dict[str, Handle] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="acp-session")

    def get(self, session_id: str) -> Handle:
        """The open session, or the ACP "not found" error naming what to do."""
        handle = self.handles.get(session_id)
        if handle is None:
            raise RequestError(
                NOT_FOUND, f"session {session_id} is not open here: use session/new or session/load"
            )
        return handle

    @staticmethod
    async def settled(handle: Handle) -> None:
        """Wait until the session's workers are no longer being stopped (if they are)."""
        while handle.cooling is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(handle.cooling)

    async def call(
        self,
        fn: Callable[[], T],
        handle: Handle | None = None,
        run: bool = False,
        redactor: Redactor | None = None,
    ) -> T:
        """fn in a worker thread; kernel errors become JSON-RPC errors with text redacted by
        `redactor`, else the handle's session's, else the process's. `run`: fn is the
        session's run, which shutdown waits for."""
        future = self._pool.submit(fn)
        if run and handle is not None:
            handle.running = future
        if redactor is None:
            redactor = handle.session.redactor if handle is not None else self.config.redactor
        try:
            return await asyncio.wrap_future(future)
        except RequestError:
            raise
        except Exception as exc:
            raise as_request_error(exc, redactor) from None

    def redactor_for(self, session_id: str | None) -> Redactor:
        """The redactor of a message that belongs to this session (wire.StdioTransport)."""
        handle = self.handles.get(session_id) if session_id is not None else None
        return handle.session.redactor if handle is not None else self.config.redactor

    def close_all(self) -> None:
        """Wait for each session's run, release its workers and lock (in a thread), then the
        pool."""
        for handle in list(self.handles.values()):
            if handle.running is not None:
                concurrent.futures.wait([handle.running])
            try:
                handle.close()
            except Exception as exc:  # one stubborn session must not keep others locked
                message = self.config.log_redactor.text(f"{type(exc).__name__}: {exc}")
                print(f"jmp: closing session {handle.id} failed: {message}", file=sys.stderr)
        self.handles.clear()
        self._pool.shutdown(wait=True)
