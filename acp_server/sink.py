"""A session's `on_event` subscriber and answer stream: updates sent in log order.

Records reach the sink once fsynced, on the session's commit thread (kernel/store/commit.py);
the streamed answer and the approver's `pending` call come from the run's thread. What the run
thread shows first syncs the log, so that every record appended before it (a thought, a call's
end) is shown before it, and one lock keeps the translator and the sends of both threads in
order. A send blocks its thread until the event loop has written the update, so a turn's
updates all precede the prompt's response; it gives up when the connection is gone. The sink
also holds the session's approver (acp_server/modes.py), which asks on the run's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from acp_server.modes import Approver
from acp_server.translator import Translator
from acp_server.updates import Update
from kernel.errors import JmpError
from protocol.events import Event

if TYPE_CHECKING:
    from acp_server.sender import Sender
    from acp_server.sessions import Handle
    from kernel.store.session import Session


def title_of_session(session: Session) -> str:
    """Its title as `session/list` gives it, read from the log's first lines (the catalog's
    reader: no record of the history is decoded)."""
    from kernel.store.catalog import read_info

    row = read_info(session.directory)
    return row.title if row is not None else ""


def context_size(handle: Handle) -> int:
    """The `size` of the session's `usage_update`: its FLASH_CONTEXT_BYTES (acp_server/usage.py)."""
    agent = getattr(handle, "agent", None)
    settings = getattr(getattr(agent, "models", None), "settings", None)
    return int(getattr(settings, "flash_context_bytes", 0))


class Sink:
    """Translate, then send (blocking), in log order; silent until bound to its handle."""

    def __init__(self, sender: Sender) -> None:
        self.sender = sender
        self.handle: Handle | None = None
        self.translator: Translator | None = None
        self.approver = Approver(self)
        # Re-entrant: a sync on the run thread may announce records on that same thread.
        self._order = threading.RLock()

    def bind(self, handle: Handle) -> Translator:
        session = handle.session
        self.translator = Translator(
            session.workspace,
            session.artifacts.read_text,
            session.redactor,
            context_size=context_size(handle),
        )
        self.translator.title = title_of_session(session)
        self.approver.load(session)
        self.handle = handle
        handle.sink = self
        return self.translator

    def __call__(self, event: Event) -> None:
        if self.handle is None or self.translator is None:
            return  # events while opening (the session record, a torn-line error)
        with self._order:
            for update in self.translator.live(event):
                self.send(self.handle, update)

    def answer(self, offset: int, text: str) -> None:
        """The answer's text as it streams (`Agent(on_answer=...)`), redacted by the stream."""
        self.from_run(lambda translator: translator.answer(offset, text))

    def from_run(self, updates: Callable[[Translator], list[Update]]) -> None:
        """Updates made on the run's thread, shown after every record appended before them
        (none once the log failed: nothing behind a failure is shown)."""
        handle = self.handle
        if handle is None or self.translator is None:
            return
        try:
            handle.session.sync()  # before the lock: the commit thread announces under it
        except JmpError:
            return  # the run stops on its next append, naming the file
        with self._order:
            for update in updates(self.translator):
                self.send(handle, update)

    def send(self, handle: Handle, update: Update) -> None:
        self.sender.send(handle.id, update)
