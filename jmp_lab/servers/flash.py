"""A loopback OpenAI-compatible chat completions server (SSE like OpenAI) for tests and demos.

Replies come from a queue of scripted items (`{"tool_call": {"arguments": ...}}` or
`{"text": ...}`), else a default: "Done." without tools, a minimal object satisfying the
tool schema's required fields with tools. Faults are injected per request.
"""

from __future__ import annotations

import argparse
import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from jmp_lab.servers.common import Fault, Faults, LoopbackServer, Recorder, read_body
from jmp_lab.servers.flash_reply import build_chunks, build_completion, default_item, flood_events

FAULT_KINDS = ("http500", "invalid_json", "cut", "slow", "drop", "flood")
FLOOD_PIECE = 32_768  # characters per SSE event of a flood
COMPLETION_PATHS = ("/v1/chat/completions", "/chat/completions")
BROKEN_ARGUMENTS = '{"path": "/tmp/x", "file_text": "unterminated'


class FlashState:
    """The server's reply queue, faults and request record, shared by its handler threads."""

    def __init__(self, chunk_chars: int = 8, key: str | None = None) -> None:
        self.lock = threading.Lock()
        self.key = key  # when set, a request without this bearer key is refused (401)
        self.items: list[dict[str, Any]] = []
        self.faults = Faults(FAULT_KINDS)
        self.recorder = Recorder()
        self.chunk_chars = chunk_chars
        self.ids = itertools.count(1)
        # Once the queue is empty: a reply for a request (`jmp-demo --serve`'s echo policy),
        # else None and the default reply.
        self.fallback: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None

    def next_item(self, body: dict[str, Any]) -> dict[str, Any]:
        """The next scripted reply, or the default for this request."""
        with self.lock:
            if self.items:
                return self.items.pop(0)
        return (self.fallback and self.fallback(body)) or default_item(body)


class FlashHandler(BaseHTTPRequestHandler):
    """HTTP front of FlashState, answering like the OpenAI chat completions API."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stalls
    state: FlashState

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `.requests` instead."""

    def _send_json(self, status: int, payload: Any, **headers: str) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str, **headers: str) -> None:
        payload = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._send_json(status, payload, **headers)

    def _refused(self) -> bool:
        """Bearer auth when the server has a key, as OpenAI answers a wrong one: 401."""
        if self.state.key is None:
            return False
        header = self.headers.get("Authorization") or ""
        given = header[7:] if header.startswith("Bearer ") else ""
        if hmac.compare_digest(given.encode(), self.state.key.encode()):
            return False
        self._error(401, "Incorrect API key provided", "invalid_request_error")
        return True

    def do_GET(self) -> None:
        self.state.recorder.add(self, None)
        if self._refused():
            return
        if self.path.split("?")[0] in ("/v1/models", "/models"):
            model = {"id": "deepseek-v4-flash", "object": "model", "created": 0, "owned_by": "jmp"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._error(404, f"No route {self.path}", "not_found")

    def do_POST(self) -> None:
        raw = read_body(self)
        self.state.recorder.add(self, raw)
        if self.path.split("?")[0] not in COMPLETION_PATHS:
            self._error(404, f"No route {self.path}", "not_found")
            return
        if self._refused():
            return
        fault = self.state.faults.take()
        if fault and fault.kind in ("http500", "drop"):
            self._fail(fault)
            return
        try:
            body = json.loads(raw.decode("utf-8"))
            assert isinstance(body, dict) and isinstance(body.get("messages"), list)
        except (UnicodeDecodeError, json.JSONDecodeError, AssertionError):
            self._error(400, "body is not a chat completions request", "invalid_request_error")
            return
        item = self.state.next_item(body)
        if fault and fault.kind == "invalid_json" and "tool_call" in item:
            item = {"tool_call": {"arguments": BROKEN_ARGUMENTS}}
        reply_id = f"chatcmpl-{next(self.state.ids)}"
        if body.get("stream") and fault and fault.kind == "flood":
            self._write_events(flood_events(body, item, reply_id, fault.chars, FLOOD_PIECE))
        elif body.get("stream"):
            chunks = build_chunks(body, item, reply_id, self.state.chunk_chars)
            self._stream(chunks, fault)
        else:
            self._send_json(200, build_completion(body, item, reply_id))

    def _fail(self, fault: Fault) -> None:
        if fault.kind == "http500":
            # retry-after-ms keeps the SDK's real retries fast in tests.
            retry_ms = str(fault.retry_after_ms)
            self._error(500, "injected fault", "server_error", retry_after_ms=retry_ms)
        else:
            self.close_connection = True
            self.connection.close()

    def _write_events(self, events: Iterator[bytes]) -> None:
        """SSE from a (possibly endless) iterator, until it ends or the client goes away."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True  # the client stopped reading: the point of a flood

    def _stream(self, chunks: list[bytes], fault: Fault | None) -> None:
        """SSE over chunked encoding; a cut fault closes the socket mid-body."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        delay = fault.seconds if fault and fault.kind == "slow" else 0.0
        cut_after = fault.after_chunks if fault and fault.kind == "cut" else None
        try:
            for n, event in enumerate(chunks):
                if cut_after is not None and n >= cut_after:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.close()
                    return
                if delay:
                    time.sleep(delay)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (e.g. cancelled): nothing to do


def check_items(items: list[Any]) -> None:
    """ValueError naming the first entry that is not a reply item."""
    for item in items:
        if not isinstance(item, dict) or not (
            "text" in item or "arguments" in (item.get("tool_call") or {})
        ):
            raise ValueError(f"not a reply item: {item!r}")


class FlashServer(LoopbackServer):
    """`with FlashServer() as flash:` an OpenAI-compatible server; `flash.url` ends in /v1."""

    def __init__(self, port: int = 0, chunk_chars: int = 8, key: str | None = None) -> None:
        self.state = FlashState(chunk_chars, key)
        self._serve(FlashHandler, port)

    @property
    def url(self) -> str:
        """Base URL including /v1, as FLASH_BASE_URL."""
        return self.address + "/v1"

    def completions(self) -> list[dict[str, Any]]:
        """The parsed bodies of chat completion requests, in arrival order."""
        return [r["body"] for r in self.requests if r["path"] in COMPLETION_PATHS]

    def queue(self, items: list[dict[str, Any]]) -> None:
        """Append scripted replies: {"tool_call": {"arguments": obj or str}} or {"text": str}.

        A tool_call may also carry "name" (default selected_action) and "id" (default call_0).
        """
        check_items(items)
        with self.state.lock:
            self.state.items.extend(items)

    @property
    def pending_items(self) -> int:
        with self.state.lock:
            return len(self.state.items)

    def fault(
        self,
        kind: str,
        count: int = 1,
        seconds: float = 0.0,
        after_chunks: int = 2,
        retry_after_ms: int = 10,
        chars: int = 0,
    ) -> None:
        """Inject `kind` (http500, invalid_json, cut, slow, drop, flood) into the next `count`
        POSTs. A flood streams `chars` characters of answer or argument text (0: without end)."""
        self.state.faults.add(
            kind,
            count,
            seconds=seconds,
            after_chunks=after_chunks,
            retry_after_ms=retry_after_ms,
            chars=chars,
        )


def main(argv: list[str] | None = None) -> int:
    """`python -m jmp_lab.servers.flash --port N [--queue FILE.json]`: serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m jmp_lab.servers.flash")
    parser.add_argument("--port", type=int, default=8788)
    parser.add_argument("--queue", help="JSON list of reply items")
    args = parser.parse_args(argv)
    server = FlashServer(port=args.port)
    if args.queue:
        with open(args.queue, encoding="utf-8") as f:
            server.queue(json.load(f))
    return server.serve_until_interrupted("flash test server")


if __name__ == "__main__":
    raise SystemExit(main())
