"""Pieces shared by the loopback test servers: fault queue, request record, body reading."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, applied to one request."""

    kind: str
    seconds: float = 0.0  # delay (whole response, or per chunk for a slow stream)
    retry_after_ms: int = 10  # sent with HTTP 500 so SDK retries stay fast in tests
    after_chunks: int = 2  # a cut stream closes after this many chunks
    chars: int = 0  # a flood streams this many characters (0: without end)
    answer: Any = None  # Jev `answer`: changes applied to each choice answer (see jev.py)


class Faults:
    """A FIFO of faults: each pending fault is used by exactly one request."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        self._lock = threading.Lock()
        self._queue: list[Fault] = []

    def add(self, kind: str, count: int = 1, **params: Any) -> None:
        """Queue `count` copies of a fault; unknown kinds are refused loudly."""
        if kind not in self.kinds:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(self.kinds)}")
        with self._lock:
            self._queue.extend(Fault(kind, **params) for _ in range(count))

    def take(self) -> Fault | None:
        """The fault for this request, if any."""
        with self._lock:
            return self._queue.pop(0) if self._queue else None

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def clear(self) -> int:
        """Drop every pending fault; how many there were."""
        with self._lock:
            count, self._queue = len(self._queue), []
            return count


class Recorder:
    """Every request a server received, in arrival order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def add(self, handler: BaseHTTPRequestHandler, raw: bytes | None) -> None:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                body = raw.decode("utf-8", "replace")
        item = {
            "method": handler.command,
            "path": handler.path.split("?")[0],
            "headers": dict(handler.headers.items()),
            "body": body,
        }
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items)


def read_body(handler: BaseHTTPRequestHandler, limit: int = 32 * 1024 * 1024) -> bytes:
    """The request body, by Content-Length or chunked transfer encoding."""
    if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
        parts: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                return b"".join(parts)
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(min(int(handler.headers.get("Content-Length") or 0), limit))


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server on 127.0.0.1 that ignores clients hanging up (cancel, cut, drop)."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    """Start `serve_forever` on a daemon thread; the caller shuts it down."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    return thread


class LoopbackServer:
    """Shared life cycle of the loopback servers: serve `state` with `handler` on 127.0.0.1."""

    state: Any

    def _serve(self, handler: type[BaseHTTPRequestHandler], port: int) -> None:
        bound = type(f"Bound{handler.__name__}", (handler,), {"state": self.state})
        self._server = QuietServer(bound, port)
        self._thread = serve_in_thread(self._server)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request received: {"method", "path", "headers", "body"} (body parsed if JSON)."""
        return list(self.state.recorder.snapshot())

    def clear_faults(self) -> int:
        """Drop the faults not used yet; how many there were."""
        return int(self.state.faults.clear())

    def serve_until_interrupted(self, name: str) -> int:
        """For `python -m jmp_lab.servers.<name>`: announce the URL, serve until Ctrl+C."""
        print(f"{name} on {self.url}", flush=True)  # type: ignore[attr-defined]
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
        self.close()
        return 0

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
