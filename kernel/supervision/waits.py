"""Who is waiting for a worker to start: a process-wide hook for front ends' live views.

`Worker.wait_ready` wraps its wait in `waiting(kind)`; a listener (the CLI's readable view)
hears `(kind, True)` before and `(kind, False)` after, and decides what to show (nothing for
a short wait). Listeners never see a prompt or a result, and a failing listener is ignored.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

Listener = Callable[[str, bool], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def add_listener(listener: Listener) -> Callable[[], None]:
    """Register `listener`; returns the function that removes it."""
    with _lock:
        _listeners.append(listener)

    def remove() -> None:
        with _lock, contextlib.suppress(ValueError):
            _listeners.remove(listener)

    return remove


def _tell(kind: str, started: bool) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        with contextlib.suppress(Exception):
            listener(kind, started)


@contextlib.contextmanager
def waiting(kind: str) -> Iterator[None]:
    """Tell listeners that the caller waits for the `kind` worker until the block ends."""
    _tell(kind, True)
    try:
        yield
    finally:
        _tell(kind, False)
