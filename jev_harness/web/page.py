"""What a web provider returns: a captured page (text, links, sections) or a WebError."""

from __future__ import annotations

from dataclasses import dataclass, field


class WebError(Exception):
    """A refused or failed acquisition. `code` is stable; the message names the problem."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Link:
    """A link found on a page: absolute URL (fragment stripped) and its visible text."""

    url: str
    text: str


@dataclass(frozen=True)
class Section:
    """A part of a page's text that starts at a heading (or the text before the first one)."""

    id: str
    heading: str
    start: int
    end: int


@dataclass(frozen=True)
class Page:
    """A page as captured: `text` is what goes to the evidence store, `url` the final URL."""

    url: str
    requested_url: str
    title: str
    text: str
    links: tuple[Link, ...] = ()
    sections: tuple[Section, ...] = ()
    truncated: bool = False
    content_type: str = "text/html"
    charset: str = "utf-8"
    bytes_read: int = 0
    hops: tuple[str, ...] = field(default_factory=tuple)

    def metadata(self) -> dict[str, object]:
        """Compact facts for the store's metadata (no text, no links)."""
        return {
            "url": self.url,
            "requested_url": self.requested_url,
            "title": self.title,
            "truncated": self.truncated,
            "content_type": self.content_type,
            "charset": self.charset,
            "bytes": self.bytes_read,
            "redirects": len(self.hops),
            "links": len(self.links),
            "sections": [s.id for s in self.sections],
        }
