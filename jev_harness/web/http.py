"""HttpProvider: GET-only page capture with per-hop origin checks and a byte cap.

Contract: `fetch(url)` sends GET requests only, follows at most MAX_REDIRECTS redirects by hand,
and checks every hop (http(s), no user info, origin in `allowed_origins`, public address unless
the origin names an inward one) BEFORE any request to it; a refused hop sends nothing to its
origin and raises WebError naming it. The connection goes to the very addresses that were
checked (no second DNS lookup). The body is read in a stream up to `max_bytes` (2 MB default;
`Page.truncated` says when more existed); only text types are accepted. `deadline_s` bounds
the whole fetch, every hop's connect, request, response headers and body included: a server
that dribbles its headers or body is cut off at the deadline (WebError "timeout"); `timeout_s`
bounds each socket wait. Nothing is cached: the caller (WebTools) captures each page once into
its evidence store. Constructing a provider does no I/O at all.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from jev_harness.web.deadline import Deadline
from jev_harness.web.html import (
    choose_charset,
    decode,
    html_to_text,
    plain_sections,
)
from jev_harness.web.page import Page, WebError
from jev_harness.web.urls import (
    OriginPolicy,
    Resolver,
    canonical_url,
    entry_and_origins,
    resolve,
    split_origin,
)

MAX_REDIRECTS = 5
MAX_BYTES = 2 * 1024 * 1024
REDIRECTS = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript"})
SNIFF_BYTES = 1024
USER_AGENT = "jev-harness/0.1 (+https://github.com/apixly/jmp)"
_SAFE_PATH = "/%:@!$&'()*+,;=-._~"
_SAFE_QUERY = _SAFE_PATH + "?"


def media_type(content_type: str) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def is_text_type(kind: str) -> bool:
    return (
        kind.startswith("text/")
        or kind in HTML_TYPES
        or kind in TEXT_TYPES
        or kind.endswith(("+xml", "+json"))
    )


def request_target(url: str) -> str:
    """Path and query for the request line, percent-encoded where http.client would refuse."""
    parts = urlsplit(url)
    target = quote(parts.path or "/", safe=_SAFE_PATH)
    return target + ("?" + quote(parts.query, safe=_SAFE_QUERY) if parts.query else "")


class HttpProvider:
    """Server-rendered pages over plain HTTP(S) on `allowed_origins` (default: the entry's)."""

    kind = "http"

    def __init__(
        self,
        url: str,
        allowed_origins: str | Iterable[str] | None = None,
        *,
        max_bytes: int = MAX_BYTES,
        timeout_s: float = 15.0,
        deadline_s: float = 60.0,
        resolver: Resolver = resolve,
    ) -> None:
        entry, origins = entry_and_origins(url, allowed_origins)
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.url = entry
        self.allowed_origins = origins
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.policy = OriginPolicy(origins, resolver)

    def allows(self, url: str) -> bool:
        """Whether a link may be offered (scheme, user info and origin; no DNS)."""
        return self.policy.allows(url)

    def describe(self) -> dict[str, Any]:
        return {"provider": self.kind, "allowed_origins": list(self.allowed_origins)}

    def close(self) -> None:
        """Nothing to release: every fetch closes its own connection."""

    def fetch(self, url: str) -> Page:
        """GET `url`, following redirects by hand; every hop checked before it is requested."""
        requested = current = canonical_url(url)
        hops: list[str] = []
        seen = {current}
        deadline = Deadline(self.deadline_s)
        while True:
            try:
                addresses = self.policy.addresses(current)
            except WebError as exc:
                if hops:
                    raise WebError(exc.code, f"{exc.message} (redirect to {current})") from None
                raise
            conn, response = self._get(current, addresses, deadline)
            try:
                if response.status not in REDIRECTS:
                    return self._page(requested, current, response, tuple(hops), deadline)
                current = self._next_hop(current, response, hops, seen)
            finally:
                deadline.stop()
                conn.close()

    def _next_hop(
        self, current: str, response: http.client.HTTPResponse, hops: list[str], seen: set[str]
    ) -> str:
        location = (response.getheader("Location") or "").strip()
        if not location:
            raise WebError("http_status", f"{current} answered {response.status} without Location")
        try:
            target = canonical_url(urljoin(current, location))
        except ValueError:
            raise WebError("url_refused", f"{current} redirected to a bad URL") from None
        hops.append(target)
        if len(hops) > MAX_REDIRECTS:
            raise WebError(
                "too_many_redirects", f"more than {MAX_REDIRECTS} redirects (the last to {target})"
            )
        if target in seen:
            raise WebError("redirect_loop", f"redirect loop: {current} leads back to {target}")
        seen.add(target)
        return target

    def _get(
        self, url: str, addresses: list[str], deadline: Deadline
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        scheme, host, port = split_origin(url)
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = cls(host, port, timeout=self.timeout_s)

        def pinned(address: Any, timeout: Any = None, source: Any = None) -> socket.socket:
            # Connect to the addresses that passed the check, not to a fresh lookup, each
            # attempt within what is left of the deadline.
            error: OSError = OSError(f"no address for {host}")
            for ip in addresses:
                left = deadline.left()
                if left <= 0:
                    break
                wait = left if timeout is None else min(timeout, left)
                try:
                    return socket.create_connection((ip, address[1]), wait, source)
                except OSError as exc:
                    error = exc
            raise error

        conn._create_connection = pinned  # type: ignore[attr-defined]
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
            "Accept-Encoding": "identity",
            "Connection": "close",
        }
        deadline.watch(conn)
        try:
            conn.request("GET", request_target(url), headers=headers)
            response = conn.getresponse()
            if deadline.expired:  # the headers were cut short, not ended by the server
                response.close()
                raise TimeoutError("the deadline passed")
            return conn, response
        except (OSError, http.client.HTTPException, ValueError) as exc:
            deadline.stop()
            conn.close()
            if deadline.expired or deadline.left() <= 0:
                raise deadline.error(url) from None
            raise WebError("network", f"GET {url} failed: {type(exc).__name__}: {exc}") from None

    def _page(
        self,
        requested: str,
        url: str,
        response: http.client.HTTPResponse,
        hops: tuple[str, ...],
        deadline: Deadline,
    ) -> Page:
        if not 200 <= response.status < 300:
            raise WebError("http_status", f"{url} answered HTTP {response.status}")
        content_type = response.getheader("Content-Type") or ""
        kind = media_type(content_type)
        if kind and not is_text_type(kind):
            raise WebError("not_text", f"{url} is {kind}, not text; binary content is refused")
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise WebError("not_text", f"{url} sent Content-Encoding {encoding}, refused")
        raw, truncated = self._read(url, response, deadline)
        if not kind:
            kind = "text/html" if raw.lstrip()[:1] == b"<" else "text/plain"
        is_html = kind in HTML_TYPES
        charset = choose_charset(raw, content_type, is_html)
        if b"\x00" in raw[:SNIFF_BYTES] and not charset.startswith(("utf-16", "utf-32")):
            raise WebError("not_text", f"{url} looks binary (NUL bytes), refused")
        text = decode(raw, charset)
        if is_html:
            title, body, links, sections = html_to_text(text, url)
        else:
            title, body, links = urlsplit(url).path.rsplit("/", 1)[-1] or url, text, ()
            sections = plain_sections(body, title)
        return Page(
            url,
            requested,
            title or url,
            body,
            links,
            sections,
            truncated,
            kind,
            charset,
            len(raw),
            hops,
        )

    def _read(
        self, url: str, response: http.client.HTTPResponse, deadline: Deadline
    ) -> tuple[bytes, bool]:
        """At most max_bytes of the body, and whether more existed; within the deadline."""
        chunks: list[bytes] = []
        total = 0
        try:
            while total <= self.max_bytes:
                chunk = response.read1(min(65536, self.max_bytes + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if deadline.left() <= 0:
                    raise deadline.error(url)
        except (OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise deadline.error(url) from None
            raise WebError(
                "network", f"reading {url} failed: {type(exc).__name__}: {exc}"
            ) from None
        if deadline.expired:  # the socket was shut down: what was read is not the whole body
            raise deadline.error(url)
        raw = b"".join(chunks)
        return raw[: self.max_bytes], total > self.max_bytes
