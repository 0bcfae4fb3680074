"""The deadline of one HTTP fetch, enforced on the socket itself.

Socket timeouts bound each wait, not their sum: a server that sends one header byte every few
seconds keeps a fetch alive for ever. `Deadline` is a timer that shuts the connection's socket
down when the fetch's time is up, so every wait (connect, TLS, headers, body) ends there.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time

from jev_harness.web.page import WebError


class Deadline:
    """The end of one fetch: a timer that shuts the connection's socket down when it passes,
    so no wait on a hop (connect, TLS, headers, body) outlasts it."""

    RECHECK_S = 0.05  # the socket may not exist yet when the time is up (mid-connect)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._conn: http.client.HTTPConnection | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def left(self) -> float:
        return self.end - time.monotonic()

    def watch(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conn = conn
            self._start(max(0.0, self.left()))

    def stop(self) -> None:
        with self._lock:
            self._conn = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _start(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if self._conn is None:
                return
            self.expired = True
            sock = self._conn.sock
            if sock is None:
                self._start(self.RECHECK_S)
                return
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def error(self, url: str) -> WebError:
        return WebError("timeout", f"{url} took more than {self.seconds:g} s")
