"""WebTools: `web.open_link(link)` and `web.read_section(page, section)` over one provider.

Entry capture (the driver hook): the entry page is NOT fetched when the toolkit is built or
observed. `entry_operations(task)` (the model's hook, called once by the harness worker) returns
one operation, `web.open_link` with the entry link, which the driver logs (`tool_started`,
fsynced, then `tool_finished`) and runs through `task.operate` like any other. A direct Python
caller without a driver may call `materialize(task)`, which runs the same operation.

Domains (fresh on every ask; asking never captures):
- `web.open_link.link` (explore): links found on captured pages, on allowed origins, not yet
  opened (a link whose opening failed is not offered again: nothing is re-fetched); never
  javascript:, data:, mailto: or user-info links; fragments stripped; deduplicated. Ids are the
  path (and query) on the entry origin, `host:port/path` elsewhere; an id once given stays.
- `web.read_section.page` (explore): captured pages that still have unread sections.
- `web.read_section.section` (match): the page's sections cut into parts of at most 1,200
  characters (`heading-slug`, `heading-slug.2`, ...), read from the store, never re-downloaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from jev_harness.evidence_store import EvidenceStore
from jev_harness.model import Option, Outcome, Parameter, Tool, Toolkit
from jev_harness.task import Task
from jev_harness.text import MAX_WINDOW_CHARS, clip, opening
from jev_harness.web.page import Link, Page, Section, WebError
from jev_harness.web.urls import canonical_url, origin_of

MAX_ID_CHARS = 80


class Provider(Protocol):
    url: str

    def allows(self, url: str) -> bool: ...
    def fetch(self, url: str) -> Page: ...
    def describe(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Captured:
    """A page in the store: its reference, its id and its sections."""

    ref: str
    id: str
    page: Page


class WebTools(Toolkit):
    """Web sources for a task: links become known only as pages are captured."""

    name = "web"

    def __init__(self, provider: Provider, store: EvidenceStore) -> None:
        self.provider = provider
        self.store = store
        self.entry = canonical_url(provider.url)
        self._entry_origin = origin_of(self.entry)
        self._ids: dict[str, str] = {}  # url -> id, stable for the toolkit's life
        self._taken: set[str] = set()
        self.pages: list[Captured] = []
        self.opened: set[str] = set()  # every URL asked for or landed on (ok or not)
        self.failures = 0
        self.read_parts: set[tuple[str, str]] = set()  # (page ref, part id) already returned
        self.open_link = Tool(
            "web.open_link",
            "Open a link found on a captured page and capture that page as evidence.",
            (Parameter("link", "the link to open", self._link_domain, "explore"),),
            self._open,
        )
        self.read_section = Tool(
            "web.read_section",
            "Read one section of a captured page (from the store; nothing is downloaded).",
            (
                Parameter("page", "the captured page", self._page_domain, "explore"),
                Parameter(
                    "section", "the section to read", self._section_domain, "match", ("page",)
                ),
            ),
            self._read,
        )

    # -- the model's hooks ---------------------------------------------------------------

    def install(self, task: Task) -> None:
        task.register(self.open_link)
        task.register(self.read_section)

    def entry_operations(self, task: Task) -> list[tuple[Tool, dict[str, Option]]]:
        if self.entry in self.opened:
            return []
        option = Option(self.link_id(self.entry), f"entry page {self.entry}", self.entry)
        return [(self.open_link, {"link": option})]

    def materialize(self, task: Task) -> list[Outcome]:
        """For direct callers without a driver: run the entry operations now."""
        return [task.operate(tool, chosen) for tool, chosen in self.entry_operations(task)]

    def observe(self) -> dict[str, Any]:
        return {
            **self.provider.describe(),
            "entry": self.entry,
            "pages": len(self.pages),
            "failed_opens": self.failures,
            "links_offered": len(self._links()),
        }

    def close(self) -> None:
        self.provider.close()

    # -- ids ----------------------------------------------------------------------------

    def link_id(self, url: str) -> str:
        """A readable id for a URL, stable for this toolkit's life and unique within it."""
        if url in self._ids:
            return self._ids[url]
        parts = urlsplit(url)
        rest = parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")
        if origin_of(url) != self._entry_origin:
            rest = f"{parts.netloc}/{rest}"
        ident = rest or "index"
        if len(ident) > MAX_ID_CHARS:
            digest = hashlib.sha256(url.encode()).hexdigest()[:8]
            ident = f"{ident[: MAX_ID_CHARS - 9]}~{digest}"
        base, n = ident, 1
        while ident in self._taken:
            n += 1
            ident = f"{base}~{n}"
        self._ids[url] = ident
        self._taken.add(ident)
        return ident

    # -- web.open_link ------------------------------------------------------------------

    def _links(self) -> list[Link]:
        seen: set[str] = set()
        out: list[Link] = []
        for captured in self.pages:
            for link in captured.page.links:
                url = canonical_url(link.url)
                if url in seen or url in self.opened or not self.provider.allows(url):
                    continue
                seen.add(url)
                out.append(Link(url, link.text))
        return out

    def _link_domain(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        return [
            Option(
                self.link_id(link.url), clip(f"{link.url} — {link.text or '(no text)'}"), link.url
            )
            for link in self._links()
        ]

    def _open(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        url = canonical_url(str(chosen["link"].value))
        self.opened.add(url)  # before the fetch: a failed or interrupted link is not re-offered
        try:
            page = self.provider.fetch(url)
        except WebError as exc:
            self.failures += 1
            return Outcome("error", exc.message, source=url, target=url, data={"code": exc.code})
        self.opened.update({page.url, page.requested_url, *page.hops})
        ref = self.store.put(page.text, page.url, page.metadata())
        captured = Captured(ref, self.link_id(page.url), page)
        self.pages.append(captured)
        new_links = sum(1 for link in page.links if link.url not in self.opened)
        shown = self.store.read(ref, 0, MAX_WINDOW_CHARS)
        cut = ", truncated at the byte cap" if page.truncated else ""
        summary = (
            f"captured {page.url} as {ref} ({captured.id}): {page.title!r}, {len(page.text)} "
            f"chars{cut}, {new_links} links, sections: {', '.join(s.id for s in page.sections)}"
        )
        data = {
            "ref": ref,
            "page": captured.id,
            "url": page.url,
            "chars": len(page.text),
            "bytes": page.bytes_read,
            "truncated": page.truncated,
            "links": len(page.links),
            "redirects": list(page.hops),
            "sections": len(page.sections),
        }
        return Outcome(
            "ok",
            summary,
            text=shown,
            source=page.url,
            target=url,
            window=(ref, 0, len(shown)),
            data=data,
        )

    # -- web.read_section ---------------------------------------------------------------

    def parts(self, captured: Captured) -> list[tuple[str, Section, int, int]]:
        """(part id, section, start, end): sections cut into spans of at most 1,200 chars."""
        out = []
        for section in captured.page.sections:
            start, n = section.start, 1
            while start < section.end:
                end = min(section.end, start + MAX_WINDOW_CHARS)
                out.append((section.id if n == 1 else f"{section.id}.{n}", section, start, end))
                start, n = end, n + 1
        return out

    def _unread(self, captured: Captured) -> list[tuple[str, Section, int, int]]:
        return [p for p in self.parts(captured) if (captured.ref, p[0]) not in self.read_parts]

    def _page_domain(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        return [
            Option(c.id, clip(f"{c.page.url} — {c.page.title}"), c)
            for c in self.pages
            if self._unread(c)
        ]

    def _section_domain(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        captured: Captured = parents["page"].value
        text = captured.page.text
        return [
            Option(
                ident,
                clip(f"{section.heading} ({end - start} chars): {opening(text[start:end], 140)}"),
                (start, end),
            )
            for ident, section, start, end in self._unread(captured)
        ]

    def _read(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        captured: Captured = chosen["page"].value
        start, end = chosen["section"].value
        self.read_parts.add((captured.ref, chosen["section"].id))
        shown = self.store.read(captured.ref, start, end - start)
        summary = (
            f"read {captured.id} § {chosen['section'].id} ({len(shown)} chars of {captured.ref})"
        )
        return Outcome(
            "ok",
            summary,
            text=shown,
            source=captured.page.url,
            target=captured.id,
            window=(captured.ref, start, start + len(shown)),
            data={
                "ref": captured.ref,
                "section": chosen["section"].id,
                "start": start,
                "end": start + len(shown),
            },
        )
