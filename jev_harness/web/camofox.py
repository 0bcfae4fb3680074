"""CamofoxProvider: rendered pages through a camofox-browser REST server on loopback.

The client speaks the REST API of camofox-browser 1.17.0 (npm `@askjo/camofox-browser`, its
server.js and lib/snapshot.js): `POST /tabs` {userId, sessionKey} -> {tabId}; `POST
/tabs/{tabId}/navigate` {userId, url} -> {ok, url, httpStatus, navigationOk}; `GET
/tabs/{tabId}/snapshot?userId[&offset]` -> {url, snapshot, truncated, totalChars, hasMore,
nextOffset}; `GET /tabs/{tabId}/links?userId&limit&offset` -> {links: [{url (or href), text}],
pagination}; `DELETE /tabs/{tabId}?userId`. Errors are {error, code?}. The tab is gone on a 410,
whose code says why: `browser_restarted` (the browser restarted in the last 5 minutes),
`page_crashed` (the page crashed; the server destroyed the tab), `tab_destroyed` (the session closed
while the request waited), `tab_timeout`; the fetch fails with that code (any other 410:
`tab_gone`), an owned tab is forgotten and the next fetch opens a new one; nothing is retried, since
the destination may have been asked. A 404 "Tab not found" (what the server answers for a tab lost
more than 5 minutes after a restart, or reaped) on navigate is replaced once: the owned tab is
dropped, a new one opened and the navigation sent again (it never began); later in a fetch it is
`tab_gone`. A caller's tab (`tab=`) is never replaced: its loss is `tab_gone` (or the 410's code)
naming it. 429 when the session's tab limit is reached (`tab_limit`). A navigation whose HTTP status
is not 2xx is a failed fetch naming the status (`http_status`; a destination 5xx comes as the
server's 502 `destination_unavailable`), never a capture of the error page. A snapshot over 80,000
characters is followed window by window to its end (`_snapshot`); the server's truncation marker
never lands in the text. `CAMOFOX_ACCESS_KEY`, when set, goes as `Authorization: Bearer` and is
scrubbed from every text this provider returns (captures, links, errors); without one, nothing is
sent. It goes to whatever listens at the base URL: the URL must be loopback, but any local process
that holds that port gets the key.

Contract: the destination is checked (http(s), no user info, allowed origin, public address
unless the origin names an inward one) before the browser is asked; the final URL after
navigation, and the snapshot's URL, are checked again, and a page that ended elsewhere is
refused with no capture. A tab this provider opened is deleted by `close()`; a caller's tab
(`tab=`) is never deleted. The browser loads subresources and resolves names itself: these
checks constrain destinations and final origins, they are no network firewall.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from jev_harness.web.aria import snapshot_text
from jev_harness.web.html import sections_from
from jev_harness.web.page import Link, Page, WebError
from jev_harness.web.urls import (
    OriginPolicy,
    Resolver,
    canonical_url,
    entry_and_origins,
    resolve,
)
from protocol.redact import redact

DEFAULT_BASE_URL = "http://127.0.0.1:9377"
MAX_CHARS = 2 * 1024 * 1024
MAX_LINKS = 2000
LINK_PAGE = 500
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
SESSION_KEY = "jev-harness"
# camofox-browser 1.17.0 (lib/snapshot.js): a snapshot longer than MAX_SNAPSHOT_CHARS comes in
# windows: `offset`..`nextOffset` of the whole, a marker, then always its last TAIL_CHARS.
TAIL_CHARS = 5000
MAX_WINDOWS = 64
# The 410 answers of 1.17.0 (server.js handleRouteError, tabNotFoundResponse, withTabLock): the
# tab is gone, each a WebError of its code; any other 410 is `tab_gone`, as a 404 for our tab.
GONE = ("browser_restarted", "page_crashed", "tab_destroyed", "tab_timeout")
NOT_FOUND = "Tab not found"


class _TabNotFound(WebError):
    """404 "Tab not found" for the tab in use (`tab_gone`)."""


def loopback_base(base_url: str) -> str:
    """The base URL if it is http(s) on a loopback host; else ValueError."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or parts.username or parts.password:
        raise ValueError(f"camofox base URL must be http(s) without user info, not {base_url!r}")
    try:
        inward = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        inward = False
    if not inward:
        raise ValueError(
            f"camofox base URL must be on loopback (127.0.0.1, ::1, localhost): {host!r}"
        )
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


class CamofoxProvider:
    """Pages rendered by a camofox-browser server; `session` is its userId."""

    kind = "camofox"

    def __init__(
        self,
        url: str,
        allowed_origins: str | Iterable[str] | None = None,
        session: str = "jev-harness",
        tab: str | None = None,
        base_url: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_chars: int = MAX_CHARS,
        resolver: Resolver = resolve,
    ) -> None:
        entry, origins = entry_and_origins(url, allowed_origins)
        if not isinstance(session, str) or not session.strip():
            raise ValueError("camofox session (its userId) must be a non-empty string")
        self.url = entry
        self.allowed_origins = origins
        self.policy = OriginPolicy(origins, resolver)
        self.session = session
        self.tab = tab
        self.owns_tab = False
        self.base_url = loopback_base(base_url or os.environ.get("CAMOFOX_URL") or DEFAULT_BASE_URL)
        self.timeout_s = timeout_s
        self.max_chars = max_chars
        # In the harness worker the key is not in the environment: the kernel hands it to this
        # provider after the task is built (use_access_key); used alone, it is read here.
        self.__key = os.environ.get("CAMOFOX_ACCESS_KEY") or None

    def use_access_key(self, key: str | None) -> None:
        """Send `key` as the bearer key from now on (the harness worker's way to hand it over)."""
        self.__key = key or None

    def __repr__(self) -> str:
        return f"CamofoxProvider(url={self.url!r}, base_url={self.base_url!r}, tab={self.tab!r})"

    def allows(self, url: str) -> bool:
        return self.policy.allows(url)

    def describe(self) -> dict[str, Any]:
        return {"provider": self.kind, "allowed_origins": list(self.allowed_origins)}

    def scrub(self, text: str) -> str:
        """The text with the access key (if any) replaced: it must reach nothing we return."""
        return redact(text, *([self.__key] if self.__key else []))

    # -- REST -----------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        parts = urlsplit(self.base_url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout_s)
        headers = {"Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, parts.path + path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read(MAX_RESPONSE_BYTES + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise WebError(
                "camofox", self.scrub(f"{method} {path} failed: {type(exc).__name__}: {exc}")
            ) from None
        finally:
            conn.close()
        if len(raw) > MAX_RESPONSE_BYTES:
            raise WebError(
                "camofox", f"{method} {path}: response larger than {MAX_RESPONSE_BYTES} bytes"
            )
        try:
            payload = json.loads(raw.decode("utf-8", "replace") or "{}")
        except json.JSONDecodeError:
            payload = {"error": raw[:200].decode("utf-8", "replace")}
        if not isinstance(payload, dict):
            payload = {"error": "unexpected response shape"}
        if response.status >= 400:
            detail = self.scrub(str(payload.get("error") or payload)[:300])
            where = f"{method} {path.split('?')[0]} answered {response.status}: {detail}"
            if response.status == 410:  # the tab is gone: why is the answer's code
                code = str(payload.get("code") or "")
                raise WebError(
                    code if code in GONE else "tab_gone",
                    f"{where} ({self._forget_tab()}; nothing captured)",
                )
            if response.status == 404 and str(payload.get("error") or "").startswith(NOT_FOUND):
                raise _TabNotFound("tab_gone", f"{where} ({self._forget_tab()}; nothing captured)")
            if payload.get("code") == "destination_unavailable":  # the page answered 5xx
                raise WebError("http_status", f"{where} (the destination failed; nothing captured)")
            if response.status == 429:
                raise WebError(
                    "tab_limit",
                    f"{where} (camofox's tab limit for session {self.session!r} is reached: close "
                    "its other tabs, or pass tab= to use one of them)",
                )
            raise WebError("camofox", where)
        return payload

    def _forget_tab(self) -> str:
        """The server no longer holds our tab: an owned one is dropped (the next call opens a
        new one); a caller's tab is kept, and the caller told. What happened, for the error."""
        if self.owns_tab:
            self.tab, self.owns_tab = None, False
            return "the camofox tab is gone; the next fetch opens a new one"
        return (
            f"the caller's camofox tab {self.tab!r} is gone; pass another tab= (or none, and "
            "the provider opens its own)"
        )

    def _navigate(self, requested: str) -> dict[str, Any]:
        """POST navigate in our tab; a tab the server answers 404 "Tab not found" for (a browser
        restart more than 5 minutes ago, a reaped idle session) is replaced, once: the
        navigation never began, so nothing is asked of the destination twice."""
        self._ensure_tab()
        body = {"userId": self.session, "url": requested}
        try:
            return self._call("POST", self._tab_path("/navigate"), body)
        except _TabNotFound:
            if self.tab is not None:  # a caller's tab: never replaced
                raise
        self._ensure_tab()
        return self._call("POST", self._tab_path("/navigate"), body)

    def _q(self, **params: Any) -> str:
        return "?" + urlencode({"userId": self.session, **params})

    def _tab_path(self, suffix: str = "") -> str:
        return f"/tabs/{quote(str(self.tab), safe='')}{suffix}"

    def _ensure_tab(self) -> None:
        if self.tab is None:
            created = self._call(
                "POST", "/tabs", {"userId": self.session, "sessionKey": SESSION_KEY}
            )
            tab = created.get("tabId")
            if not isinstance(tab, str) or not tab:
                raise WebError("camofox", "POST /tabs answered without a tabId")
            self.tab, self.owns_tab = tab, True

    def _final(self, requested: str, final: Any, when: str) -> str:
        """Check a URL the browser ended on; refusing it means no capture."""
        final_url = canonical_url(str(final or ""))
        try:
            self.policy.check(final_url)
        except WebError as exc:
            raise WebError(
                exc.code, self.scrub(f"{exc.message} ({when} {requested} ended on {final_url})")
            ) from None
        return final_url

    # -- the provider --------------------------------------------------------------------

    def fetch(self, url: str) -> Page:
        """Navigate the tab to `url` and capture its whole snapshot and its links."""
        requested = canonical_url(url)
        self.policy.addresses(requested)  # refused before the browser is asked anything
        nav = self._navigate(requested)
        final = self._final(requested, nav.get("url") or requested, "navigation to")
        status = nav.get("httpStatus")
        if (
            nav.get("ok") is False
            or nav.get("navigationOk") is False
            or (isinstance(status, int) and not 200 <= status < 300)
        ):
            if isinstance(status, int):
                raise WebError(
                    "http_status", f"{final} answered HTTP {status} (camofox); nothing captured"
                )
            raise WebError("camofox", f"camofox could not navigate to {requested} (ok: false)")
        raw, snap_url, cut = self._snapshot()
        final = self._final(requested, snap_url or final, "snapshot of")
        text, starts = snapshot_text(self.scrub(raw))
        truncated = cut or len(text) > self.max_chars
        text = text[: self.max_chars]
        starts = [(o, h) for o, h in starts if o < len(text)]
        title = starts[0][1] if starts else final
        links = self._links()
        return Page(
            final,
            requested,
            self.scrub(title)[:200],
            text,
            links,
            sections_from(text, starts, title),
            truncated,
            "text/x-accessibility-snapshot",
            "utf-8",
            len(text.encode()),
            (final,) if final != requested else (),
        )

    def _snapshot(self) -> tuple[str, str, bool]:
        """(the whole snapshot, its URL, cut): a truncated snapshot is followed window by window
        (`offset`/`nextOffset`) to its end; what cannot be had (more windows than MAX_WINDOWS or
        max_chars allow, or a window that is not the one asked for: a server whose cache of
        the snapshot is gone answers the first window again) is replaced by a visible omission line
        and the page is marked truncated. Each window is the whole's characters from `offset`
        to `nextOffset`, the server's marker, then the whole's last TAIL_CHARS characters; the
        last window's chunk reaches into that tail."""
        first = self._call("GET", self._tab_path("/snapshot") + self._q())
        url = str(first.get("url") or "")
        head = str(first.get("snapshot") or "")
        total = first.get("totalChars")
        if not first.get("truncated"):
            return head, url, False
        if not isinstance(total, int) or total <= TAIL_CHARS:
            return head + self._omission(0, total), url, True
        parts: list[str] = []
        offset, window = 0, first
        budget = first.get("nextOffset")  # the chunk of every window but the last
        if not isinstance(budget, int) or not 0 < budget < total:
            return head + self._omission(0, total), url, True
        for _ in range(MAX_WINDOWS):
            body = str(window.get("snapshot") or "")
            nxt = window.get("nextOffset")
            if window.get("hasMore"):
                if nxt != offset + budget or not nxt < total:  # not the window asked for
                    return "".join(parts) + self._omission(offset, total), url, True
                parts.append(body[: nxt - offset])
                offset = nxt
                if offset >= 2 * self.max_chars:  # the text would be cut here anyway
                    return "".join(parts) + self._omission(offset, total), url, True
                window = self._call("GET", self._tab_path("/snapshot") + self._q(offset=offset))
                if str(window.get("url") or url) != url:
                    return "".join(parts) + self._omission(offset, total), url, True
                continue
            need = total - offset  # the last window: its chunk, the marker, the tail
            if len(body) != min(budget, need) + 1 + TAIL_CHARS:
                return "".join(parts) + self._omission(offset, total), url, True
            parts.append(body[-need:] if need <= TAIL_CHARS else body[: need - TAIL_CHARS])
            if need > TAIL_CHARS:
                parts.append(body[-TAIL_CHARS:])
            return "".join(parts), url, False
        return "".join(parts) + self._omission(offset, total), url, True

    @staticmethod
    def _omission(start: int, total: object) -> str:
        end = total if isinstance(total, int) else "its end"
        return (
            f"\n- text: [jev-harness: characters {start} to {end} of this page's snapshot were "
            "not returned by camofox and are omitted here]\n"
        )

    def _links(self) -> tuple[Link, ...]:
        found: dict[str, str] = {}
        offset = 0
        while offset < MAX_LINKS:
            page = self._call(
                "GET", self._tab_path("/links") + self._q(limit=LINK_PAGE, offset=offset)
            )
            items = page.get("links") or []
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, dict):
                    continue
                href = canonical_url(str(item.get("url") or item.get("href") or ""))
                if (
                    not href.lower().startswith(("http://", "https://"))
                    or "@" in href.split("/")[2]
                ):
                    continue
                found.setdefault(
                    self.scrub(href),
                    self.scrub(" ".join(str(item.get("text") or "").split()))[:100],
                )
            more = (
                (page.get("pagination") or {}).get("hasMore")
                if isinstance(page.get("pagination"), dict)
                else False
            )
            if not more or not items:
                break
            offset += len(items)
        return tuple(Link(u, t) for u, t in found.items())

    def close(self) -> None:
        """Delete the tab if this provider opened it (once); a caller's tab stays open."""
        if not self.owns_tab or self.tab is None:
            return
        try:
            self._call("DELETE", self._tab_path() + self._q())
        finally:
            self.tab, self.owns_tab = None, False
