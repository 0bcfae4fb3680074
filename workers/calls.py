"""Blocking vendor calls made cancellable (secret scrubbing is protocol/redact.py).

A vendor SDK call cannot be interrupted from outside, so it runs on a daemon thread and the
handler waits in short slices, checking the cancel event: a cancel answers within POLL_S even if
the provider is silent. The abandoned thread ends on its own (next chunk, or the SDK's timeout).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterable
from typing import Any

POLL_S = 0.05  # cancel latency bound while waiting on a provider
_END = object()


class Cancelled(Exception):
    """The cancel event was set while waiting on the provider."""


def call_cancellable[T](fn: Callable[[], T], cancel: threading.Event) -> T:
    """fn() on a daemon thread; its result or exception, or Cancelled as soon as cancel is set."""
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

    def run() -> None:
        try:
            box.put((True, fn()))
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            box.put((False, exc))

    threading.Thread(target=run, name="vendor-call", daemon=True).start()
    while True:
        if cancel.is_set():
            raise Cancelled
        try:
            ok, value = box.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if ok:
            return value  # type: ignore[no-any-return]
        raise value


def _pump(open_stream: Callable[[], Any], out: queue.Queue[Any], stop: threading.Event) -> None:
    """Open the stream and feed its items to `out`, then _END or the exception; always closes."""
    stream = None
    try:
        stream = open_stream()
        for item in stream:
            if stop.is_set():
                return
            out.put(item)
        out.put(_END)
    except BaseException as exc:
        out.put(exc)
    finally:
        if stream is not None:
            stream.close()


def stream_cancellable[T](
    open_stream: Callable[[], Iterable[T]], cancel: threading.Event
) -> Generator[T]:
    """Items of open_stream() as they arrive; raises Cancelled within POLL_S of a cancel."""
    out: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    threading.Thread(
        target=_pump, args=(open_stream, out, stop), name="stream", daemon=True
    ).start()
    try:
        while True:
            if cancel.is_set():
                raise Cancelled
            try:
                item = out.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()  # the pump closes the stream at its next item or error


def unreachable(exc: BaseException, variable: str, url: str) -> str:
    """For a failure to reach a server (no connection, a timeout): which server, and the
    variable that chose it, as a suffix of the error's detail; "" for any other error."""
    names = [type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None]
    if any("Connect" in n or "Timeout" in n for n in names) or isinstance(exc, ConnectionError):
        return f" (the server at {url}, {variable})"
    return ""
