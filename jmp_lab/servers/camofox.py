"""A loopback fake of the camofox-browser REST API as its 1.17.0 release speaks it.

The real server (npm `@askjo/camofox-browser` 1.17.0) installs here but cannot render: its
browser (Camoufox) downloads from outside the package registries. This fake answers the routes
CamofoxProvider uses with the shapes of that release's server.js and lib/snapshot.js:
`GET /health`, `POST /tabs` (429 past `max_tabs` tabs of one userId, as MAX_TABS_PER_SESSION),
`GET /tabs`, `POST /tabs/{tabId}/navigate` ({ok, tabId, url, refsAvailable, httpStatus,
navigationOk}; a destination 5xx is a 502 `destination_unavailable`), `GET
/tabs/{tabId}/snapshot[?offset]` (windowed past 80,000 characters: `window_snapshot`, a port of
windowSnapshot), `GET /tabs/{tabId}/links` ({links: [{url, text}], pagination}; `link_key =
"href"` gives the older shape), `DELETE /tabs/{tabId}`; errors are `{"error", "code"?}`.
A tab the server does not hold answers as server.js's tabNotFoundResponse: 410 `browser_restarted`
within 5 minutes of a browser restart (`restart(ago_s=)`: it happened that long ago; a tab id that
is no UUID never), else 404 `{"error": "Tab not found"}`. A navigation to a URL in `crash_on`
answers 410 `page_crashed` and the tab is destroyed (handleRouteError); one in `destroy_on` answers
410 `tab_destroyed` and every tab of that userId is gone (its session closed while the request
waited: TabLock.drain); later requests for those tabs get 404 "Tab not found". With `key=`, every
route but /health needs `Authorization: Bearer <key>` (401 otherwise, as CAMOFOX_ACCESS_KEY).

Navigation: with `render=True` a real headless Chromium does it (jev_harness.web.browser: one
browser for the fake, a context per userId, a page per tab) and the snapshot is Playwright's
`ariaSnapshot()` of the body with `[eN]` refs added to interactive roles, exactly as the real
server builds it; otherwise a GET with urllib (redirects followed) and an lxml rendering in the
same YAML shape (no script runs). `leak = True` echoes the Authorization header in snapshots,
links and errors (a hostile server). `drift[url] = other` makes a later snapshot report `other`.
`land_on[url] = final` makes a navigation to `url` end on `final` without fetching;
`canned[url] = yaml` makes it give that snapshot. `forget = True` ignores a snapshot's
`offset`, as the real server does once its cached snapshot is gone (it answers the first window).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
import threading
import time
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
MAX_SNAPSHOT_CHARS = 80000  # lib/snapshot.js
RESTART_WINDOW_S = 300.0  # server.js tabNotFoundResponse: 410 within 300,000 ms of a restart
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
# server.js handleRouteError: the bodies of its 410 answers.
PAGE_CRASHED = {
    "error": "Page crashed. Open a new tab.",
    "code": "page_crashed",
    "retryable": True,
    "recovery": "create_new_tab",
}
TAB_DESTROYED = {
    "error": "Tab was destroyed. Open a new tab.",
    "code": "tab_destroyed",
    "retryable": True,
    "recovery": "create_new_tab",
}
SNAPSHOT_TAIL_CHARS = 5000
INTERACTIVE_ROLES = frozenset(  # lib/interactive-roles.js
    [
        "button",
        "link",
        "textbox",
        "checkbox",
        "radio",
        "menuitem",
        "listitem",
        "combobox",
        "tab",
        "searchbox",
        "slider",
        "spinbutton",
        "switch",
    ]
)
_ITEM = re.compile(r'^(\s*-\s+)(\w+)(\s+"([^"]*)")?(.*)$')
LINKS_JS = """() => {
  const links = [];
  document.querySelectorAll('a[href]').forEach(a => {
    const href = a.href;
    const text = a.textContent?.trim().slice(0, 100) || '';
    if (href && href.startsWith('http')) links.push({ url: href, text });
  });
  return links;
}"""


def window_snapshot(yaml: str, offset: int = 0) -> dict[str, Any]:
    """lib/snapshot.js windowSnapshot: a head chunk from `offset`, a marker, the last 5,000."""
    total = len(yaml)
    if total <= MAX_SNAPSHOT_CHARS:
        return {"text": yaml, "truncated": False, "totalChars": total, "hasMore": False}
    budget = MAX_SNAPSHOT_CHARS - SNAPSHOT_TAIL_CHARS - 200
    tail = yaml[-SNAPSHOT_TAIL_CHARS:]
    start = min(max(0, offset), total - SNAPSHOT_TAIL_CHARS)
    end = start + budget
    more = end < total - SNAPSHOT_TAIL_CHARS
    marker = (
        f"\n[... truncated at char {end} of {total}. Call snapshot with offset={end} to see "
        "more. Pagination links below. ...]\n"
        if more
        else "\n"
    )
    return {
        "text": yaml[start:end] + marker + tail,
        "truncated": True,
        "totalChars": total,
        "hasMore": more,
        "nextOffset": end if more else None,
    }


def annotate(yaml: str) -> tuple[str, int]:
    """Add `[eN]` after the name of each interactive role, as server.js does; (text, refs)."""
    out, n = [], 0
    for line in yaml.split("\n"):
        match = _ITEM.match(line)
        if match and match.group(2).lower() in INTERACTIVE_ROLES:
            n += 1
            prefix, role, quoted, _name, rest = match.groups()
            line = f"{prefix}{role}{quoted or ''} [e{n}]{rest}"
        out.append(line)
    return "\n".join(out), n


def _scalar(text: str) -> str:
    """A YAML value as Playwright writes one: quoted when it could be misread."""
    if re.search(r"^[\s\-'\"\[{&*!|>%@`#]|: |#|\s$", text) or text.lower() in ("true", "false"):
        return json.dumps(text, ensure_ascii=False)
    return text


def build_snapshot(body: bytes, content_type: str) -> tuple[str, list[dict[str, str]]]:
    """(ariaSnapshot-shaped YAML, links) of a page parsed with lxml (no script runs)."""
    if "html" not in content_type:
        text = body.decode("utf-8", "replace")
        rows = [f"- text: {_scalar(line.strip())}" for line in text.splitlines() if line.strip()]
        return "\n".join(rows), []
    doc = lxml_html.document_fromstring(body or b"<html></html>")
    for el in list(doc.iter("script", "style")):
        el.drop_tree()
    lines: list[str] = []
    links: list[dict[str, str]] = []

    def walk(el: Any, depth: int) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        pad = "  " * depth
        words = _SPACE.sub(" ", el.text_content() if tag else "").strip()
        if tag in HEADINGS:
            lines.append(f"{pad}- heading {json.dumps(words)} [level={tag[1]}]")
        elif tag == "a" and el.get("href") is not None:
            lines.append(f"{pad}- link {json.dumps(words)}:")
            lines.append(f"{pad}  - /url: {el.get('href')}")
            links.append({"href": el.get("href") or "", "text": words[:100]})
        elif tag == "p" and words:
            lines.append(f"{pad}- paragraph: {_scalar(words)}")
        elif tag in ("main", "ul", "ol", "li", "nav", "section") and len(el):
            role = {"ul": "list", "ol": "list", "li": "listitem", "nav": "navigation"}
            lines.append(f"{pad}- {role.get(tag, 'region' if tag == 'section' else tag)}:")
            for child in el:
                walk(child, depth + 1)
        elif tag == "li" and words:
            lines.append(f"{pad}- listitem: {_scalar(words)}")
        else:
            for child in el:
                walk(child, depth)

    body_el = doc.find("body")
    walk(body_el if body_el is not None else doc, 0)
    return "\n".join(lines), links


class CamofoxState:
    def __init__(self, key: str | None, render: bool = False, max_tabs: int = 10) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.recorder = Recorder()
        self.tabs: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.restarted_at: float | None = None  # monotonic time of the last browser restart
        self.crash_on: set[str] = set()  # a navigation here crashes the page: 410 page_crashed
        self.destroy_on: set[str] = set()  # ... closes the session meanwhile: 410 tab_destroyed
        self.land_on: dict[str, str] = {}
        self.drift: dict[str, str] = {}  # page url -> url a later snapshot reports (a JS redirect)
        self.canned: dict[str, str] = {}  # page url -> the snapshot YAML it gives (no fetch)
        self.forget = False  # as the real server without its cached snapshot: offset ignored
        self.leak = False  # a hostile server: echo the Authorization header in what it returns
        self.max_tabs = max_tabs
        self.link_key = "url"  # 1.17.0's links carry `url`; "href" gives the older shape
        self.browser: Any = None
        if render:
            from jev_harness.web.browser import Browser

            self.browser = Browser()
            self.browser.start()

    def navigate(self, tab: dict[str, Any], url: str) -> int | None:
        """Load `url` in `tab`; the destination's HTTP status (None when there is none)."""
        if url in self.land_on:
            tab.update(url=self.land_on[url], snapshot="- paragraph: elsewhere", links=[])
            return 200
        if url in self.canned:
            tab.update(url=url, snapshot=self.canned[url], links=[])
            return 200
        if self.browser is not None:
            return int(self.browser.call(lambda b: self._render(b, tab, url), 60))
        try:
            with _OPENER.open(url, timeout=20) as response:
                body, final = response.read(4 * 1024 * 1024), response.geturl()
                kind = response.headers.get("Content-Type") or "text/html"
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            body, final, kind, status = exc.read(), exc.geturl() or url, "text/html", exc.code
        snapshot, links = build_snapshot(body, kind)
        absolute = [{"url": urljoin(final, ln["href"]), "text": ln["text"]} for ln in links]
        tab.update(url=final, snapshot=annotate(snapshot)[0], links=absolute)
        return status

    def _render(self, browser: Any, tab: dict[str, Any], url: str) -> int | None:
        """On the browser's thread: the tab's page goes to `url`; snapshot and links read."""
        if tab.get("page") is None:
            contexts = self.__dict__.setdefault("contexts", {})
            if tab["userId"] not in contexts:
                contexts[tab["userId"]] = browser.new_context()
            tab["page"] = contexts[tab["userId"]].new_page()
        page = tab["page"]
        response = page.goto(url, timeout=30000, wait_until="load")
        with contextlib.suppress(Exception):  # still busy: the snapshot is taken as it stands
            page.wait_for_load_state("networkidle", timeout=5000)
        yaml = page.locator("body").aria_snapshot(timeout=10000)
        tab.update(url=page.url, snapshot=annotate(yaml)[0], links=page.evaluate(LINKS_JS))
        return None if response is None else int(response.status)

    def close_tab(self, tab: dict[str, Any]) -> None:
        page = tab.pop("page", None)
        if page is not None and self.browser is not None:
            self.browser.call(lambda _b: page.close(), 30)

    def restart(self, ago_s: float = 0.0) -> None:
        """The browser restarted `ago_s` seconds ago: every tab is lost; asking for one answers
        410 within RESTART_WINDOW_S of the restart, 404 after."""
        with self.lock:
            tabs, self.tabs = self.tabs, {}
            self.restarted_at = time.monotonic() - ago_s
        for tab in tabs.values():
            self.close_tab(tab)

    def destroy(self, tab_id: str, session: bool = False) -> None:
        """The server destroys the tab (a crashed page), or with `session` every tab of its
        userId (a closed session)."""
        with self.lock:
            tab = self.tabs.get(tab_id)
            if tab is None:
                return
            gone = [
                t
                for t, v in self.tabs.items()
                if t == tab_id or (session and v["userId"] == tab["userId"])
            ]
            closed = [self.tabs.pop(t) for t in gone]
        for each in closed:
            self.close_tab(each)

    def not_found(self, tab_id: str) -> tuple[int, dict[str, Any]]:
        """server.js tabNotFoundResponse: 410 for a UUID within 5 minutes of a restart, else 404."""
        recent = self.restarted_at is not None and (
            time.monotonic() - self.restarted_at < RESTART_WINDOW_S
        )
        if recent and UUID_RE.match(tab_id):
            return 410, {
                "error": "Tab no longer exists (browser was restarted). Create a new tab.",
                "code": "browser_restarted",
            }
        return 404, {"error": "Tab not found"}


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
            mine = sum(1 for t in self.state.tabs.values() if t["userId"] == user)
            if mine >= self.state.max_tabs:
                return self._send(429, {"error": "Maximum tabs per session reached"})
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
                else:
                    tab = None
            if tab is not None:
                self.state.close_tab(tab)
            return self._send(200, {"ok": True})
        leaked = self.headers.get("Authorization") or "" if self.state.leak else ""
        if tab is None or tab["userId"] != user:  # the user's session does not hold it
            status, answer = self.state.not_found(tab_id)
            if leaked:
                answer["error"] = f"{answer['error']} {leaked}"
            return self._send(status, answer)
        if method == "POST" and action == "/navigate":
            url = str(body.get("url") or "")
            if not url:
                return self._send(400, {"error": "url or macro required"})
            if urlsplit(url).scheme not in ("http", "https"):
                scheme = urlsplit(url).scheme
                return self._send(
                    400, {"error": f"Blocked URL scheme: {scheme}: (only http/https allowed)"}
                )
            if url in self.state.crash_on or url in self.state.destroy_on:
                crashed = url in self.state.crash_on
                self.state.destroy(tab_id, session=not crashed)
                return self._send(410, dict(PAGE_CRASHED if crashed else TAB_DESTROYED))
            try:
                status = self.state.navigate(tab, url)
            except Exception as exc:  # OSError, ValueError, a browser's navigation error
                return self._send(500, {"error": f"navigation failed: {exc}"})
            if status is not None and status >= 500:
                error = f"Destination server returned HTTP {status}"
                return self._send(502, {"error": error, "code": "destination_unavailable"})
            return self._send(
                200,
                {
                    "ok": True,
                    "tabId": tab_id,
                    "url": tab["url"],
                    "refsAvailable": bool(tab["links"]),
                    "httpStatus": status,
                    "navigationOk": status is None or status < 400,
                },
            )
        if method == "GET" and action == "/snapshot":
            text = tab["snapshot"] + (f"\n- paragraph: header {leaked}" if leaked else "")
            tab["url"] = self.state.drift.get(tab["url"], tab["url"])
            offset = 0 if self.state.forget else int(query.get("offset") or 0)
            win = window_snapshot(text, offset)
            return self._send(
                200,
                {
                    "url": tab["url"],
                    "snapshot": win["text"],
                    "refsCount": len(tab["links"]),
                    "truncated": win["truncated"],
                    "totalChars": win["totalChars"],
                    "hasMore": win["hasMore"],
                    "nextOffset": win.get("nextOffset"),
                },
            )
        if method == "GET" and action == "/links":
            limit, offset = int(query.get("limit") or 50), int(query.get("offset") or 0)
            links = tab["links"] + (
                [{"url": f"{tab['url']}?k={leaked}", "text": leaked}] if leaked else []
            )
            key = self.state.link_key
            links = [{key: ln["url"], "text": ln["text"]} for ln in links]
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

    def __init__(
        self, key: str | None = None, port: int = 0, *, render: bool = False, max_tabs: int = 10
    ) -> None:
        self.state = CamofoxState(key, render, max_tabs)
        self._serve(CamofoxHandler, port)

    def close(self) -> None:
        super().close()
        if self.state.browser is not None:
            self.state.browser.close()

    def restart(self, ago_s: float = 0.0) -> None:
        """As a browser restart `ago_s` seconds ago: every tab is gone; asking for one answers
        410 `browser_restarted` for 5 minutes after it, then 404 "Tab not found"."""
        self.state.restart(ago_s)

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
