"""A loopback site whose content is made by JavaScript: only a browser that runs scripts sees it.

`with RenderedSite() as site:` serves at `site.url`. Every page is an empty shell plus a script;
the markers are assembled by the script, so they appear in no byte the server sends (an HTTP
fetch or an lxml parse finds none of them). Pages:

- `/`: a heading, a paragraph with `JS_MARKER`, links (to `/facts`, `/hop`, `/js-hop`, `/gone`,
  `/long`, `/slow` and an origin that is not allowed), and a section that appears only after a
  second request (`/api/late`, answered after `late_s`) with `LATE_MARKER`;
- `/facts`: a page with `FACTS_MARKER` (the research example's target) and a link home;
- `/hop`: an HTTP 302 to `/landing`; `/js-hop`: a script that moves the page to `/landing`;
  `/landing`: a page with `LANDING_MARKER`;
- `/gone`: a 404 whose body a script fills in; `/broken`: a 500;
- `/js-away?to=URL`: a script sends the page to URL; `/visits`: counts visits in localStorage
  (a fresh browser context says 1);
- `/long`: a script writes about 120,000 characters of paragraphs, `MIDDLE_MARKER` in the
  middle and `END_MARKER` last (past camofox-browser's 80,000-character snapshot window);
- `/slow`: the shell is sent only when `release_slow()` is called (or after `slow_s`).

Every request is recorded; `count(path)` and `wait_for(path)` read the record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from jmp_lab.servers.common import QuietServer, serve_in_thread

JS_MARKER = "violet-rendered-5150"
LATE_MARKER = "amber-late-8080"
FACTS_MARKER = "teal-facts-3141"
LANDING_MARKER = "coral-landing-2718"
MIDDLE_MARKER = "slate-middle-1618"
END_MARKER = "ochre-end-1414"
OUTSIDE = "http://198.51.100.7:9/elsewhere"  # a documentation address: never allowed, never asked


def _split(marker: str) -> str:
    """A JS expression that builds `marker` (its parts joined at run time)."""
    return "[" + ",".join(json.dumps(p) for p in marker.split("-")) + "].join('-')"


def _shell(title: str, script: str) -> bytes:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title></head><body><div id='app'></div>"
        f"<script>const app = document.getElementById('app');\n{script}</script></body></html>"
    ).encode()


def _index() -> bytes:
    links = [
        ("/facts", "Facts about the harbor"),
        ("/hop", "A page that moved (HTTP redirect)"),
        ("/js-hop", "A page that moves itself (script)"),
        ("/gone", "A page that is gone"),
        ("/long", "A very long page"),
        ("/slow", "A slow page"),
        (OUTSIDE, "Somewhere else"),
    ]
    items = "".join(f"<li><a href='{href}'>{text}</a></li>" for href, text in links)
    return _shell(
        "Rendered harbor",
        f"""app.innerHTML = "<main><h1>Rendered harbor</h1><p>This text was made by a script: "
  + {_split(JS_MARKER)} + ".</p><h2>Places</h2><ul>{items}</ul></main>";
fetch('/api/late').then(r => r.json()).then(d => {{
  const part = document.createElement('section');
  part.innerHTML = '<h2>Late section</h2><p>Loaded after the page: ' + d.parts.join('-') + '.</p>';
  document.querySelector('main').appendChild(part);
}});""",
    )


def _page(title: str, heading: str, marker: str, extra: str = "") -> bytes:
    return _shell(
        title,
        f"""app.innerHTML = "<main><h1>{heading}</h1><p>The answer is "
  + {_split(marker)} + ", written by a script.</p>{extra}<p><a href='/'>Home</a></p></main>";""",
    )


def _long() -> bytes:
    return _shell(
        "Long",
        f"""const parts = ['<main><h1>A very long page</h1>'];
for (let i = 0; i < 1200; i++) {{
  if (i === 600) parts.push('<p>Halfway: ' + {_split(MIDDLE_MARKER)} + '.</p>');
  parts.push('<p>Paragraph ' + i + ' of the long page, ' + 'filler words '.repeat(6) + '</p>');
}}
parts.push('<h2>The end</h2><p>Last words: ' + {_split(END_MARKER)} + '.</p></main>');
app.innerHTML = parts.join('');""",
    )


class RenderedState:
    def __init__(self, late_s: float, slow_s: float) -> None:
        self.cond = threading.Condition()
        self.log: list[str] = []
        self.late_s = late_s
        self.slow_s = slow_s
        self.release = threading.Event()

    def record(self, path: str) -> None:
        with self.cond:
            self.log.append(path)
            self.cond.notify_all()


class RenderedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    state: RenderedState

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `.requests` instead."""

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.state.record(path)
        html = "text/html; charset=utf-8"
        if path == "/":
            return self._send(200, html, _index())
        if path == "/api/late":
            threading.Event().wait(self.state.late_s)
            body = json.dumps({"parts": LATE_MARKER.split("-")}).encode()
            return self._send(200, "application/json", body)
        if path == "/facts":
            return self._send(200, html, _page("Facts", "Harbor facts", FACTS_MARKER))
        if path == "/landing":
            return self._send(200, html, _page("Landing", "Where it landed", LANDING_MARKER))
        if path == "/hop":
            return self._send(302, html, b"", Location="/landing")
        if path == "/js-hop":
            return self._send(200, html, _shell("Moving", "location.replace('/landing');"))
        if path == "/broken":  # the server fails
            return self._send(500, html, _shell("Broken", "app.innerHTML = '<p>Oops.</p>';"))
        if path == "/js-away":  # a script sends the page where the query says
            script = "location.replace(new URLSearchParams(location.search).get('to'));"
            return self._send(200, html, _shell("Away", script))
        if path == "/visits":  # what a page remembers (cookie, storage) from earlier pages
            script = """const n = (+localStorage.getItem('n') || 0) + 1;
localStorage.setItem('n', n); document.cookie = 'seen=' + n;
app.innerHTML = '<p>Visits remembered: ' + n + '.</p>';"""
            return self._send(200, html, _shell("Visits", script))
        if path == "/long":
            return self._send(200, html, _long())
        if path == "/slow":
            self.state.release.wait(self.state.slow_s)
            return self._send(200, html, _page("Slow", "Slow page", LANDING_MARKER))
        body = _shell("Not found", "app.innerHTML = '<h1>Not found</h1><p>No such page.</p>';")
        return self._send(404, html, body)

    def _send(self, status: int, kind: str, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class RenderedSite:
    """`with RenderedSite() as site:` the script-made loopback site at `site.url`."""

    def __init__(self, late_s: float = 0.3, slow_s: float = 60.0, port: int = 0) -> None:
        self.state = RenderedState(late_s, slow_s)
        bound = type("BoundRenderedHandler", (RenderedHandler,), {"state": self.state})
        self._server = QuietServer(bound, port)
        self._thread = serve_in_thread(self._server)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[str]:
        """The path of every request, in arrival order."""
        with self.state.cond:
            return list(self.state.log)

    def count(self, path: str) -> int:
        return self.requests.count(path)

    def wait_for(
        self,
        path: str,
        count: int = 1,
        timeout: float = 30.0,
        alive: Callable[[], bool] | None = None,
    ) -> bool:
        """Whether `path` was asked for `count` times within `timeout`; with `alive` (the
        client's process still running, say), False as soon as it says no, so that a run that
        ended without asking is a quick failure, not a wait for the whole timeout."""
        deadline = time.monotonic() + timeout
        with self.state.cond:
            while self.state.log.count(path) < count:
                left = deadline - time.monotonic()
                if left <= 0 or (alive is not None and not alive()):
                    return False
                self.state.cond.wait(min(left, 0.5))
            return True

    def release_slow(self) -> None:
        self.state.release.set()

    def close(self) -> None:
        self.state.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> RenderedSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m jmp_lab.servers.rendered --port N`: serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m jmp_lab.servers.rendered")
    parser.add_argument("--port", type=int, default=8792)
    args = parser.parse_args(argv)
    with RenderedSite(port=args.port) as site:
        print(f"rendered site on {site.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
