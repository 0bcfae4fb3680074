"""CamofoxProvider: rendered pages through a camofox-browser REST server on loopback.

The client speaks the server's published REST API (openapi.json of jo-inc/camofox-browser):
`POST /tabs` {userId, sessionKey} -> {tabId}; `POST /tabs/{tabId}/navigate` {userId, url} ->
{ok, url}; `GET /tabs/{tabId}/snapshot?userId` -> {url, snapshot, truncated}; `GET
/tabs/{tabId}/links?userId&limit&offset` -> {links: [{url|href, text}], pagination}; `DELETE
/tabs/{tabId}?userId`. `CAMOFOX_ACCESS_KEY`, when set, goes as `Authorization: Bearer` and is
scrubbed from every text this provider returns (captures, links, errors). It goes to whatever
listens at the base URL: the URL must be loopback, but any local process that holds that port
gets the key.

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
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

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
_LINE_RE = re.compile(
    r'^\s*-\s+([\w-]+)(?:\s+"((?:[^"\\]|\\.)*)")?((?:\s*\[[^\]]*\])*)\s*:?\s*(.*)$'
)
_LEVEL_RE = re.compile(r"\[level=(\d)\]")
_REF_RE = re.compile(r"\s*\[e\d+\]")


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


def snapshot_text(snapshot: str) -> tuple[str, list[tuple[int, str]]]:
    """Readable text from an accessibility snapshot, and (offset, heading) of its headings."""
    out: list[str] = []
    starts: list[tuple[int, str]] = []
    offset = 0
    for raw in snapshot.splitlines():
        match = _LINE_RE.match(raw)
        if raw.strip().startswith("- /"):
            continue  # properties such as `- /url: ...` repeat what the links endpoint gives
        if match is None:
            line = _REF_RE.sub("", raw).strip()
        else:
            role, name, attrs, rest = match.groups()
            name = (name or "").replace('\\"', '"')
            if role == "heading":
                level = _LEVEL_RE.search(attrs or "")
                starts.append((offset, name))
                line = "#" * int(level.group(1) if level else 2) + " " + name
            elif role in ("text", "paragraph", "listitem", "cell", "generic"):
                line = (name + " " + rest).strip()
            else:
                line = f"{role}: {(name + ' ' + rest).strip()}".strip()
        if line:
            out.append(line + "\n")
            offset += len(line) + 1
    return "".join(out), starts


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
            raise WebError(
                "camofox", f"{method} {path.split('?')[0]} answered {response.status}: {detail}"
            )
        return payload

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
        """Navigate the tab to `url` and capture its snapshot and links."""
        requested = canonical_url(url)
        self.policy.addresses(requested)  # refused before the browser is asked anything
        self._ensure_tab()
        nav = self._call(
            "POST", self._tab_path("/navigate"), {"userId": self.session, "url": requested}
        )
        final = self._final(requested, nav.get("url") or requested, "navigation to")
        snap = self._call("GET", self._tab_path("/snapshot") + self._q())
        final = self._final(requested, snap.get("url") or final, "snapshot of")
        text, starts = snapshot_text(self.scrub(str(snap.get("snapshot") or "")))
        truncated = bool(snap.get("truncated") or snap.get("hasMore")) or len(text) > self.max_chars
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
