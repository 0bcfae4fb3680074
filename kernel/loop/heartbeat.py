"""A running tool call's heartbeat: a transient `tool_progress` every interval until it ends.

A silent command (a build, `sleep`) says nothing for minutes; the heartbeat tells a front end
that it still runs and for how long (issue 34). It is transient (seq null, Session.emit): it
never reaches the log, the recall index or a model's context. The beat stops, and its thread is
joined, before the call's end is recorded, so no heartbeat follows a call's `tool_finished`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from protocol.events import ToolProgressData

if TYPE_CHECKING:
    from kernel.store.session import Session


@contextlib.contextmanager
def beating(session: Session, call_id: str, tool: str, interval_s: float) -> Iterator[None]:
    """Emit `tool_progress` (elapsed seconds since the call left) every interval_s while the
    body runs; stopped and joined when it returns or raises."""
    stop = threading.Event()
    began = time.monotonic()

    def beat() -> None:
        while not stop.wait(interval_s):
            elapsed = round(time.monotonic() - began, 1)
            with contextlib.suppress(Exception):  # a failed log drops transient records itself
                session.emit(ToolProgressData(call_id=call_id, tool=tool, elapsed_s=elapsed))

    thread = threading.Thread(target=beat, name=f"jmp-heartbeat-{call_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
