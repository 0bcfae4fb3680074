"""A loopback test site on two ports (two origins) for the web toolkit's tests and demos.

`with SiteServer() as site:` serves the main origin at `site.url` and a second one at
`site.other_url`. Pages: an index with links of every kind (relative, absolute, fragment,
javascript:, mailto:, data:, tel:, user info, protocol-relative, other origin), a marker page, a
redirect to the other origin, a redirect loop, an endless redirect chain, a 5 MB page, a binary,
a slow page (waits until released or `slow_s`), a page whose charset is declared only in a meta
tag (windows-1251), a text/plain page, a binary served as text/plain, a page without a
Content-Type, redirects to javascript: and to a user-info URL, and a 404. Every request is
recorded with its origin (`main` or `other`); `count(path, origin)` and `wait_for(path)` read
the record.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from jmp_lab.servers.common import QuietServer, serve_in_thread

MARKER = "cobalt-harbor-1729"
BIG_BYTES = 5 * 1024 * 1024
CP1251_TEXT = "Привет, мир: проверка кодировки"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8


def _html(title: str, body: str, head: str = "") -> str:
    return (
        f"<!doctype html><html><head>{head}<title>{title}</title></head><body>{body}</body></html>"
    )


def index_page(main: str, other: str) -> str:
    links = [
        '<a href="about.html">About (relative)</a>',
        f'<a href="{main}/marker">Marker page (absolute)</a>',
        '<a href="/facts#second">Facts, second part (fragment)</a>',
        '<a href="/facts">Facts</a>',
        '<a href="#top">Back to top (fragment only)</a>',
        '<a href="javascript:alert(1)">Run script</a>',
        '<a href="JaVaScRiPt:void(0)">Run script, mixed case</a>',
        '<a href="mailto:someone@example.com">Write to us</a>',
        '<a href="data:text/html,<b>hi</b>">Data URL</a>',
        '<a href="tel:+15555550100">Call us</a>',
        f'<a href="http://user:secret@{main.split("//")[1]}/facts">With user info</a>',
        f'<a href="{other}/secret">Other origin</a>',
        f'<a href="//{other.split("//")[1]}/protocol-relative">Other origin, protocol-relative</a>',
        '<a href="/redirect-other">Redirect to the other origin</a>',
        '<a href="/loop">Redirect loop</a>',
        '<a href="/chain/0">Endless redirect chain</a>',
        '<a href="/big">A very large page</a>',
        '<a href="/binary">A binary file</a>',
        '<a href="/slow">A slow page</a>',
        '<a href="/cp1251">Charset in a meta tag</a>',
        '<a href="/plain.txt">Plain text</a>',
        '<a href="/missing">A missing page</a>',
    ]
    items = "".join(f"<li>{link}</li>" for link in links)
    body = (
        "<h1>Test site</h1><p>Welcome to the loopback test site.</p>"
        f"<script>document.write('script text must not appear')</script>"
        f"<style>.x {{ color: red }}</style><h2>Links</h2><ul>{items}</ul>"
    )
    return _html("Test site index", body)


def pages(main: str, other: str) -> dict[str, tuple[int, dict[str, str], bytes]]:
    """path -> (status, headers, body) for the main origin."""
    html = {"Content-Type": "text/html; charset=utf-8"}
    marker = _html(
        "Marker page",
        "<h1>Marker page</h1><p>Some introduction.</p><h2>The fact</h2>"
        f"<p>The harbor code is {MARKER}, recorded in 1729.</p><h2>Footnotes</h2><p>None.</p>"
        '<p><a href="/facts">Facts</a> <a href="/">Home</a></p>',
    )
    facts = _html(
        "Facts",
        "<h1>Facts</h1><p>First part.</p><h2 id='second'>Second part</h2><p>Second facts.</p>"
        '<a href="/marker">The marker page</a>',
    )
    cp1251 = (
        '<html><head><meta charset="windows-1251"><title>Кодировка</title></head>'
        f"<body><h1>Кодировка</h1><p>{CP1251_TEXT}</p></body></html>"
    ).encode("cp1251")
    return {
        "/": (200, html, index_page(main, other).encode()),
        "/about.html": (200, html, _html("About", "<h1>About</h1><p>About us.</p>").encode()),
        "/marker": (200, html, marker.encode()),
        "/facts": (200, html, facts.encode()),
        "/redirect-other": (302, {"Location": f"{other}/landing"}, b""),
        "/loop": (302, {"Location": "/loop2"}, b""),
        "/loop2": (302, {"Location": "/loop"}, b""),
        "/binary": (200, {"Content-Type": "image/png"}, PNG),
        "/fake-text": (200, {"Content-Type": "text/plain"}, PNG),
        "/untyped": (200, {}, b"<p>No content type, still <b>html</b></p>"),
        "/redirect-js": (302, {"Location": "javascript:alert(1)"}, b""),
        "/redirect-userinfo": (302, {"Location": f"http://u:pw@{main.split('//')[1]}/marker"}, b""),
        "/cp1251": (200, {"Content-Type": "text/html"}, cp1251),
        "/plain.txt": (200, {"Content-Type": "text/plain; charset=utf-8"}, b"Plain text.\n"),
    }


class SiteState:
    """The request record of both origins and the release of the slow page."""

    def __init__(self, slow_s: float) -> None:
        self.cond = threading.Condition()
        self.log: list[dict[str, Any]] = []
        self.slow_s = slow_s
        self.release = threading.Event()
        self.main = ""
        self.other = ""

    def record(self, origin: str, handler: BaseHTTPRequestHandler) -> None:
        item = {
            "origin": origin,
            "method": handler.command,
            "path": handler.path,
            "headers": dict(handler.headers.items()),
        }
        with self.cond:
            self.log.append(item)
            self.cond.notify_all()


class SiteHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    state: SiteState
    origin = "main"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `.requests` instead."""

    def do_GET(self) -> None:
        self.state.record(self.origin, self)
        path = self.path.split("?")[0]
        if self.origin == "other":
            body = _html("Other origin", f"<p>Other origin page {path}</p>").encode()
            return self._send(200, {"Content-Type": "text/html"}, body)
        if path.startswith("/chain/"):
            step = int(path.rsplit("/", 1)[1] or 0) + 1
            return self._send(302, {"Location": f"/chain/{step}"}, b"")
        if path == "/big":
            return self._big()
        if path == "/slow":
            self.state.release.wait(self.state.slow_s)
            body = _html("Slow", "<h1>Slow page</h1><p>Finally here.</p>").encode()
            return self._send(200, {"Content-Type": "text/html"}, body)
        page = pages(self.state.main, self.state.other).get(path)
        if page is None:
            return self._send(404, {"Content-Type": "text/html"}, b"<h1>Not found</h1>")
        self._send(*page)

    def do_POST(self) -> None:
        self.state.record(self.origin, self)
        self._send(405, {"Content-Type": "text/plain"}, b"GET only")

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _big(self) -> None:
        """5 MB of HTML, streamed; a client that stops reading early is fine."""
        head = b"<html><head><title>Big</title></head><body><h1>Big page</h1>"
        para = b"<p>" + b"lorem ipsum dolor sit amet " * 36 + b"</p>\n"
        count = (BIG_BYTES - len(head)) // len(para) + 1
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(head) + count * len(para)))
        self.end_headers()
        with contextlib.suppress(ConnectionError):
            self.wfile.write(head)
            for _ in range(count):
                self.wfile.write(para)


class SiteServer:
    """`with SiteServer() as site:` the two-origin loopback test site."""

    def __init__(self, slow_s: float = 30.0, port: int = 0, other_port: int = 0) -> None:
        self.state = SiteState(slow_s)
        self._servers: list[QuietServer] = []
        self._threads: list[threading.Thread] = []
        for origin, number in (("main", port), ("other", other_port)):
            bound = type(
                f"{origin}SiteHandler", (SiteHandler,), {"state": self.state, "origin": origin}
            )
            server = QuietServer(bound, number)
            self._servers.append(server)
            self._threads.append(serve_in_thread(server))
        self.state.main = self._address(0)
        self.state.other = self._address(1)

    def _address(self, index: int) -> str:
        host, number = self._servers[index].server_address[:2]
        return f"http://{host}:{number}"

    @property
    def url(self) -> str:
        """The main origin, e.g. http://127.0.0.1:PORT (its index page is `url + '/'`)."""
        return self.state.main

    @property
    def other_url(self) -> str:
        return self.state.other

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request: {"origin": "main"|"other", "method", "path", "headers"}."""
        with self.state.cond:
            return list(self.state.log)

    def count(self, path: str, origin: str = "main") -> int:
        """How many requests `origin` received for `path` (query ignored)."""
        return sum(
            1 for r in self.requests if r["origin"] == origin and r["path"].split("?")[0] == path
        )

    def wait_for(self, path: str, count: int = 1, timeout: float = 30.0) -> bool:
        """Block until `path` on the main origin has had `count` requests (False on timeout)."""
        with self.state.cond:
            return self.state.cond.wait_for(lambda: self.count_locked(path) >= count, timeout)

    def count_locked(self, path: str) -> int:
        return sum(
            1 for r in self.state.log if r["origin"] == "main" and r["path"].split("?")[0] == path
        )

    def release_slow(self) -> None:
        """Let every waiting (and future) slow request answer now."""
        self.state.release.set()

    def close(self) -> None:
        self.state.release.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> SiteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m jmp_lab.servers.site --port N --other-port M`: serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m jmp_lab.servers.site")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--other-port", type=int, default=8791)
    args = parser.parse_args(argv)
    site = SiteServer(port=args.port, other_port=args.other_port)
    print(f"test site on {site.url}/ (other origin {site.other_url})", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    site.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
