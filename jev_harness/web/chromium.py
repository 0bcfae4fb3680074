"""ChromiumProvider: pages rendered by a local headless Chromium (Playwright), JavaScript and all.

Contract (the evidence semantics of the other providers; WebTools captures and logs each page):
the destination is checked (http(s), no user info, allowed origin, public address unless the
origin names an inward one) before the browser is asked; every redirect hop the browser took,
and the URL the page ended on (a script may move it), are checked again, and a page that went
elsewhere is refused with no capture. A status outside 2xx is a failed fetch naming the status;
a non-text document is refused. Each fetch runs in a fresh browser context (no cookies, storage
or cache from an earlier page) that is closed on every path; the one browser of the provider is
launched at the first fetch (constructing a provider does no I/O) and closed by `close()`.

Bounds: `deadline_s` bounds a whole fetch (navigation, the wait for late content, the snapshot);
late content is waited for until the network is idle, at most `settle_s`; a document larger than
`max_dom_chars` is refused before it is read; the text is cut at `max_chars` (`truncated`) and
the links at `max_links`. The text is the page's accessibility snapshot (`ariaSnapshot()`, as
camofox-browser gives it) made readable by `aria.snapshot_text`.

The browser loads subresources and resolves names itself: these checks constrain destinations
and final origins, they are no network firewall (as for Camofox).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from jev_harness.web.aria import snapshot_text
from jev_harness.web.browser import Browser, find_chromium, playwright_missing
from jev_harness.web.html import sections_from
from jev_harness.web.http import is_text_type, media_type
from jev_harness.web.page import Link, Page, WebError
from jev_harness.web.urls import (
    OriginPolicy,
    Resolver,
    canonical_url,
    entry_and_origins,
    resolve,
)

MAX_CHARS = 2 * 1024 * 1024
MAX_DOM_CHARS = 16 * 1024 * 1024
MAX_LINKS = 2000
GRACE_S = 10.0  # past the deadline, the browser thread itself is given up on
# The links a reader can follow, as camofox-browser's /links collects them.
LINKS_JS = """(limit) => {
  const out = [];
  for (const a of document.querySelectorAll('a[href]')) {
    if (out.length >= limit) break;
    const href = a.href;
    const text = (a.textContent || '').trim().slice(0, 100);
    if (href && href.startsWith('http')) out.push({url: href, text});
  }
  return out;
}"""
DOM_SIZE_JS = "() => document.documentElement ? document.documentElement.outerHTML.length : 0"


class ChromiumProvider:
    """Pages rendered by a headless Chromium on this machine (one browser per provider)."""

    kind = "chromium"

    def __init__(
        self,
        url: str,
        allowed_origins: str | Iterable[str] | None = None,
        *,
        binary: str | None = None,
        deadline_s: float = 30.0,
        settle_s: float = 5.0,
        max_chars: int = MAX_CHARS,
        max_dom_chars: int = MAX_DOM_CHARS,
        max_links: int = MAX_LINKS,
        resolver: Resolver = resolve,
    ) -> None:
        entry, origins = entry_and_origins(url, allowed_origins)
        if deadline_s <= 0 or max_chars <= 0 or max_dom_chars <= 0:
            raise ValueError("deadline_s, max_chars and max_dom_chars must be positive")
        self.url = entry
        self.allowed_origins = origins
        self.policy = OriginPolicy(origins, resolver)
        self.deadline_s = deadline_s
        self.settle_s = settle_s
        self.max_chars = max_chars
        self.max_dom_chars = max_dom_chars
        self.max_links = max_links
        self.browser = Browser(binary)

    def __repr__(self) -> str:
        return f"ChromiumProvider(url={self.url!r}, browser={self.browser.binary!r})"

    def allows(self, url: str) -> bool:
        return self.policy.allows(url)

    def describe(self) -> dict[str, Any]:
        """The provider, its origins and the browser it uses (or why there is none)."""
        out: dict[str, Any] = {"provider": self.kind, "allowed_origins": list(self.allowed_origins)}
        try:
            out["browser"] = self.browser.binary or find_chromium()
        except WebError as exc:
            out["browser"] = f"none: {exc.message}"
        missing = playwright_missing()
        if missing is not None:
            out["browser"] = f"none: {missing}"
        if self.browser.version:
            out["browser_version"] = self.browser.version
        return out

    def close(self) -> None:
        """Close the browser (if it was launched); idempotent."""
        self.browser.close()

    def fetch(self, url: str) -> Page:
        """Render `url` in a fresh context and capture its text and links."""
        requested = canonical_url(url)
        self.policy.addresses(requested)  # refused before the browser is asked anything
        self.browser.start()
        end = time.monotonic() + self.deadline_s
        return self.browser.call(
            lambda browser: self._render(browser, requested, end), self.deadline_s + GRACE_S
        )

    # -- on the browser's thread -------------------------------------------------------------

    def _render(self, browser: Any, requested: str, end: float) -> Page:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        def left_ms() -> float:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise WebError("timeout", f"{requested} took more than {self.deadline_s:g} s")
            return remaining * 1000

        context = browser.new_context(accept_downloads=False, service_workers="block")
        try:
            page = context.new_page()
            try:
                response = page.goto(requested, timeout=left_ms(), wait_until="load")
                hops = self._hops(requested, response)
                with_late = min(self.settle_s * 1000, left_ms())
                with contextlib.suppress(PlaywrightTimeout):  # still busy: captured as it is
                    page.wait_for_load_state("networkidle", timeout=with_late)
                final = self._final(requested, page.url)
                if page.evaluate(DOM_SIZE_JS) > self.max_dom_chars:
                    raise WebError(
                        "too_large", f"{final} is larger than {self.max_dom_chars} characters"
                    )
                snapshot = page.locator("body").aria_snapshot(timeout=left_ms())
                title = " ".join(str(page.title() or "").split())
                found = page.evaluate(LINKS_JS, self.max_links)
            except PlaywrightTimeout:
                raise WebError(
                    "timeout", f"{requested} took more than {self.deadline_s:g} s"
                ) from None
            except PlaywrightError as exc:
                detail = str(exc.message if hasattr(exc, "message") else exc).splitlines()[0]
                raise WebError("network", f"rendering {requested} failed: {detail[:300]}") from None
        finally:
            context.close()
        text, starts = snapshot_text(str(snapshot or ""))
        truncated = len(text) > self.max_chars
        text = text[: self.max_chars]
        starts = [(o, h) for o, h in starts if o < len(text)]
        title = (title or (starts[0][1] if starts else final))[:200]
        links = self._links(found)
        if final != requested and final not in hops:
            hops.append(final)
        return Page(
            final,
            requested,
            title,
            text,
            links,
            sections_from(text, starts, title),
            truncated,
            "text/x-accessibility-snapshot",
            "utf-8",
            len(text.encode()),
            tuple(hops),
        )

    def _hops(self, requested: str, response: Any) -> list[str]:
        """The redirect hops of the navigation (each checked), then its status and type."""
        if response is None:
            return []
        chain, request = [], response.request.redirected_from
        while request is not None:
            chain.append(canonical_url(request.url))
            request = request.redirected_from
        hops = [canonical_url(response.url)] if chain else []
        hops = [*reversed(chain[:-1]), *hops]  # the requested URL itself is not a hop
        for hop in hops:
            self._final(requested, hop, "redirect of")
        status = int(response.status)
        if not 200 <= status < 300:
            raise WebError("http_status", f"{canonical_url(response.url)} answered HTTP {status}")
        kind = media_type(response.headers.get("content-type") or "text/html")
        if not is_text_type(kind):
            raise WebError("not_text", f"{response.url} is {kind}, not text; refused")
        return hops

    def _final(self, requested: str, url: str, when: str = "rendering of") -> str:
        final = canonical_url(str(url or ""))
        try:
            self.policy.check(final)
        except WebError as exc:
            message = f"{exc.message} ({when} {requested} ended on {final})"
            raise WebError(exc.code, message) from None
        return final

    def _links(self, found: Any) -> tuple[Link, ...]:
        out: dict[str, str] = {}
        for item in found if isinstance(found, list) else []:
            if not isinstance(item, dict):
                continue
            href = canonical_url(str(item.get("url") or ""))
            if not href.lower().startswith(("http://", "https://")) or "@" in href.split("/")[2]:
                continue
            out.setdefault(href, " ".join(str(item.get("text") or "").split())[:100])
        return tuple(Link(u, t) for u, t in out.items())
