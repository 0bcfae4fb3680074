"""A loopback fake of the camofox-browser REST API, built from its published openapi.json.

The real server (jo-inc/camofox-browser) cannot be installed here: it downloads a Camoufox
browser build at install time, and that download is blocked. This fake answers the routes the
CamofoxProvider uses with the shapes of the published OpenAPI description (version 1.14.0):
`GET /health`, `POST /tabs`, `GET /tabs`, `POST /tabs/{tabId}/navigate`, `GET
/tabs/{tabId}/snapshot`, `GET /tabs/{tabId}/links`, `DELETE /tabs/{tabId}`; errors are
`{"error": ...}`; with `key=`, every route but /health needs `Authorization: Bearer <key>`
(401 otherwise, as CAMOFOX_ACCESS_KEY does). "Navigation" is a real GET with urllib (redirects
followed, as a browser would); the snapshot is an accessibility-tree-like text built with lxml.
`leak = True` echoes the Authorization header in snapshots, links and errors (a hostile
server). `drift[url] = other` makes a later snapshot report `other`. `land_on[url] = final`
makes a navigation to `url` end on `final` without fetching (a client-side redirect).
"""

from __future__ import annotations

import hmac
import json
import re
import threading
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

from lxml import html as lxml_html

from jmp_lab.servers.common import LoopbackServer, Recorder, read_body

_SPACE = re.compile(r"\s+")
# No proxy from the environment: the fake browser talks to loopback test sites only.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


def build_snapshot(body: bytes, content_type: str) -> tuple[str, list[dict[str, str]]]:
    """(snapshot text, links) from a fetched page, in the server's YAML-ish line format."""
    if "html" not in content_type:
        text = body.decode("utf-8", "replace")
        return "".join(f"- text: {line}\n" for line in text.splitlines() if line.strip()), []
    doc = lxml_html.document_fromstring(body or b"<html></html>")
    for el in list(doc.iter("script", "style")):
        el.drop_tree()
    lines, links = [], []
    for el in doc.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        words = _SPACE.sub(" ", el.text_content() if tag else "").strip()
        if tag in HEADINGS:
            lines.append(f'- heading "{words}" [level={tag[1]}]')
        elif tag in ("p", "li") and words:
            lines.append(f"- paragraph: {words}")
        elif tag == "a" and el.get("href") is not None:
            ref = f"e{len(links) + 1}"
            lines.append(f'  - link "{words}" [{ref}]')
            links.append({"href": el.get("href") or "", "text": words[:100], "ref": ref})
    return "\n".join(lines) + "\n", links


class CamofoxState:
    def __init__(self, key: str | None) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.recorder = Recorder()
        self.tabs: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.land_on: dict[str, str] = {}
        self.drift: dict[str, str] = {}  # page url -> url a later snapshot reports (a JS redirect)
        self.leak = False  # a hostile server: echo the Authorization header in what it returns

    def navigate(self, tab: dict[str, Any], url: str) -> None:
        if url in self.land_on:
            tab.update(url=self.land_on[url], snapshot="- paragraph: elsewhere\n", links=[])
            return
        try:
            with _OPENER.open(url, timeout=20) as response:
                body, final = response.read(4 * 1024 * 1024), response.geturl()
                kind = response.headers.get("Content-Type") or "text/html"
        except urllib.error.HTTPError as exc:
            body, final, kind = exc.read(), exc.geturl() or url, "text/html"
        snapshot, links = build_snapshot(body, kind)
        absolute = [{**link, "href": urljoin(final, link["href"])} for link in links]
        tab.update(url=final, snapshot=snapshot, links=absolute)


class CamofoxHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    state: CamofoxState

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `.requests` instead."""

    def _send(self, status: int, payload: Any, **headers: str) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def _refused(self, path: str) -> bool:
        key = self.state.key
        if key is None or path == "/health":
            return False
        match = re.match(r"^Bearer\s+(.+)$", self.headers.get("Authorization") or "", re.I)
        if match and hmac.compare_digest(match.group(1).strip().encode(), key.encode()):
            return False
        self._send(401, {"error": "Unauthorized"}, WWW_Authenticate='Bearer realm="camofox"')
        return True

    def _route(self, method: str) -> None:
        raw = read_body(self) if method in ("POST", "DELETE") else b""
        self.state.recorder.add(self, raw)
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return self._send(400, {"error": "invalid JSON"})
        if self._refused(parts.path):
            return None
        match = re.match(r"^/tabs/([^/]+)(/[a-z]+)?$", parts.path)
        if method == "GET" and parts.path == "/health":
            return self._send(
                200,
                {
                    "ok": True,
                    "engine": "fake",
                    "browserConnected": True,
                    "browserRunning": True,
                    "activeTabs": len(self.state.tabs),
                },
            )
        if parts.path == "/tabs" and method == "POST":
            return self._create(body)
        if parts.path == "/tabs" and method == "GET":
            user = query.get("userId")
            tabs = [
                {"tabId": t, "url": v["url"], "title": "", "listItemId": v["sessionKey"]}
                for t, v in self.state.tabs.items()
                if user in (None, v["userId"])
            ]
            return self._send(200, {"running": True, "tabs": tabs})
        if match is None:
            return self._send(404, {"error": f"no route {method} {parts.path}"})
        return self._tab(method, match.group(1), match.group(2) or "", query, body)

    def _create(self, body: dict[str, Any]) -> None:
        user, key = body.get("userId"), body.get("sessionKey") or body.get("listItemId")
        if not user or not key:
            return self._send(400, {"error": "userId and sessionKey required"})
        tab_id = str(uuid.uuid4())
        tab = {"userId": user, "sessionKey": key, "url": "about:blank", "snapshot": "", "links": []}
        with self.state.lock:
            self.state.tabs[tab_id] = tab
        if body.get("url"):
            self.state.navigate(tab, body["url"])
        return self._send(200, {"tabId": tab_id, "url": tab["url"]})

    def _tab(
        self, method: str, tab_id: str, action: str, query: dict[str, str], body: dict[str, Any]
    ) -> None:
        user = body.get("userId") or query.get("userId")
        if not user:
            return self._send(400, {"error": "userId required"})
        tab = self.state.tabs.get(tab_id)
        if method == "DELETE" and not action:
            with self.state.lock:
                if tab is not None and tab["userId"] == user:
                    del self.state.tabs[tab_id]
                    self.state.deleted.append(tab_id)
            return self._send(200, {"ok": True})
        leaked = self.headers.get("Authorization") or "" if self.state.leak else ""
        if tab is None or tab["userId"] != user:
            return self._send(404, {"error": f"Tab {tab_id} not found {leaked}".strip()})
        if method == "POST" and action == "/navigate":
            url = str(body.get("url") or "")
            if not url:
                return self._send(400, {"error": "url or macro required"})
            if urlsplit(url).scheme not in ("http", "https"):
                scheme = urlsplit(url).scheme
                return self._send(
                    400, {"error": f"Blocked URL scheme: {scheme}: (only http/https allowed)"}
                )
            try:
                self.state.navigate(tab, url)
            except (OSError, ValueError) as exc:
                return self._send(500, {"error": f"navigation failed: {exc}"})
            return self._send(
                200,
                {
                    "ok": True,
                    "tabId": tab_id,
                    "url": tab["url"],
                    "refsAvailable": bool(tab["links"]),
                },
            )
        if method == "GET" and action == "/snapshot":
            text = tab["snapshot"] + (f"- paragraph: header {leaked}\n" if leaked else "")
            tab["url"] = self.state.drift.get(tab["url"], tab["url"])
            return self._send(
                200,
                {
                    "url": tab["url"],
                    "snapshot": text,
                    "refsCount": len(tab["links"]),
                    "truncated": False,
                    "totalChars": len(text),
                    "hasMore": False,
                    "nextOffset": None,
                },
            )
        if method == "GET" and action == "/links":
            limit, offset = int(query.get("limit") or 50), int(query.get("offset") or 0)
            links = tab["links"] + (
                [{"href": f"{tab['url']}?k={leaked}", "text": leaked}] if leaked else []
            )
            return self._send(
                200,
                {
                    "links": links[offset : offset + limit],
                    "pagination": {
                        "total": len(links),
                        "offset": offset,
                        "limit": limit,
                        "hasMore": offset + limit < len(links),
                    },
                },
            )
        return self._send(404, {"error": f"no route {method} /tabs/{{tabId}}{action}"})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")


class CamofoxServer(LoopbackServer):
    """`with CamofoxServer(key=...) as fox:` the fake at `fox.url` (as CAMOFOX_URL)."""

    def __init__(self, key: str | None = None, port: int = 0) -> None:
        self.state = CamofoxState(key)
        self._serve(CamofoxHandler, port)

    @property
    def url(self) -> str:
        return self.address

    @property
    def tabs(self) -> dict[str, dict[str, Any]]:
        with self.state.lock:
            return dict(self.state.tabs)

    @property
    def deleted(self) -> list[str]:
        with self.state.lock:
            return list(self.state.deleted)

    def open_tab(self, user_id: str, session_key: str = "caller") -> str:
        """A tab opened by someone else (the caller), as POST /tabs would."""
        tab_id = str(uuid.uuid4())
        with self.state.lock:
            self.state.tabs[tab_id] = {
                "userId": user_id,
                "sessionKey": session_key,
                "url": "about:blank",
                "snapshot": "",
                "links": [],
            }
        return tab_id
