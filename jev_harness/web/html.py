"""Bytes to text: charset choice, and server-rendered HTML to text, links and sections (lxml).

Charset: the Content-Type header's, else a byte-order mark, else the page's own `<meta>`
declaration (read by lxml from the first 4 KB), else UTF-8; undecodable bytes become U+FFFD.
HTML: parsed by lxml's HTML parser (no tokenizer of ours); script, style, noscript and template
elements are dropped with their content; block elements become line breaks; headings start
sections; `<a href>`/`<area href>` become absolute http(s) links (fragments stripped).
"""

from __future__ import annotations

import codecs
import contextlib
import re
from urllib.parse import urljoin

from lxml import etree
from lxml import html as lxml_html

from jev_harness.web.page import Link, Section
from jev_harness.web.urls import canonical_url

META_SCAN_BYTES = 4096
LINK_TEXT_CHARS = 100
DROPPED = ("script", "style", "noscript", "template", "head")
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCK_NAMES = (
    "address article aside blockquote br dd details div dl dt fieldset figcaption figure footer "
    "form header hr li main nav ol p pre section summary table tbody thead tfoot tr td th ul "
    "caption h1 h2 h3 h4 h5 h6 title body html"
)
BLOCKS = frozenset(_BLOCK_NAMES.split(" "))
# WHATWG maps these labels to windows-1252; Python's latin-1 would mis-decode 0x80-0x9F.
_ALIASES = {
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "iso8859-1": "cp1252",
}
_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.IGNORECASE)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACE_RE = re.compile(r"\s+")


def codec_name(label: str | None) -> str | None:
    """Python's codec for a charset label, or None when the label is unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _ALIASES.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def header_charset(content_type: str) -> str | None:
    """The charset parameter of a Content-Type header value, if any."""
    match = _CHARSET_RE.search(content_type or "")
    return match.group(1) if match else None


def bom_charset(raw: bytes) -> str | None:
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if raw.startswith(bom):
            return name
    return None


def meta_charset(raw: bytes) -> str | None:
    """The charset a page declares in `<meta charset>` or `<meta http-equiv=content-type>`."""
    head = raw[:META_SCAN_BYTES]
    if not head.strip():
        return None
    parser = lxml_html.HTMLParser(encoding="iso-8859-1", remove_comments=True, no_network=True)
    try:
        doc = lxml_html.document_fromstring(head, parser=parser)
    except (etree.ParserError, ValueError):
        return None
    for meta in doc.iter("meta"):
        declared = meta.get("charset")
        if not declared and (meta.get("http-equiv") or "").strip().lower() == "content-type":
            declared = header_charset(meta.get("content") or "")
        name = codec_name(declared)
        if name:
            # A page cannot declare UTF-16 in ASCII bytes; the HTML standard reads it as UTF-8.
            return "utf-8" if name.startswith("utf-16") else name
    return None


def choose_charset(raw: bytes, content_type: str, is_html: bool) -> str:
    """Header, then byte-order mark, then (HTML) the page's meta declaration, then UTF-8."""
    for candidate in (header_charset(content_type), bom_charset(raw)):
        name = codec_name(candidate)
        if name:
            return name
    return (meta_charset(raw) if is_html else None) or "utf-8"


def decode(raw: bytes, charset: str) -> str:
    """Text with U+FFFD for undecodable bytes and no control characters but tab and newline."""
    return _CONTROL_RE.sub("", raw.decode(charset, errors="replace"))


def _slug(text: str) -> str:
    slug = re.sub(r"[\W_]+", "-", text.lower()).strip("-")
    return slug[:40].rstrip("-") or "section"


class _Lines:
    """Collects rendered lines and heading positions while the tree is walked."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []  # (heading level or 0, text)
        self.buffer: list[str] = []
        self.pre = 0

    def add(self, text: str | None) -> None:
        if text:
            self.buffer.append(text)

    def flush(self, level: int = 0) -> None:
        raw = "".join(self.buffer)
        self.buffer = []
        if self.pre:
            self.lines.extend((0, line.rstrip()) for line in raw.split("\n") if line.strip())
            return
        line = _SPACE_RE.sub(" ", raw).strip()
        if line:
            self.lines.append((level, line))


def _render(body: etree._Element) -> list[tuple[int, str]]:
    out = _Lines()
    for event, el in etree.iterwalk(body, events=("start", "end")):
        tag = el.tag if isinstance(el.tag, str) else ""
        if event == "start":
            if tag in BLOCKS:
                out.flush()
            if tag == "pre":
                out.pre += 1
            if tag:
                out.add(el.text)
            continue
        if tag in HEADINGS:
            out.flush(HEADINGS[tag])
        elif tag in BLOCKS:
            out.flush()
        if tag == "pre":
            out.pre -= 1
        if el is not body:
            out.add(el.tail)
    out.flush()
    return out.lines


def _assemble(lines: list[tuple[int, str]], title: str) -> tuple[str, tuple[Section, ...]]:
    """Text from rendered lines (headings as Markdown), and the sections they start."""
    parts: list[str] = []
    starts: list[tuple[int, str]] = []
    offset = 0
    for level, line in lines:
        if level:
            if parts:
                parts.append("\n")
                offset += 1
            starts.append((offset, line))
            line = "#" * level + " " + line
        parts.append(line + "\n")
        offset += len(line) + 1
    text = "".join(parts)
    return text, sections_from(text, starts, title)


def sections_from(text: str, starts: list[tuple[int, str]], title: str) -> tuple[Section, ...]:
    """Sections from heading offsets; text before the first heading is section `top`."""
    bounds = [(0, title or "top of page")] if not starts or text[: starts[0][0]].strip() else []
    bounds += starts
    seen: dict[str, int] = {}
    out: list[Section] = []
    for index, (start, heading) in enumerate(bounds):
        end = bounds[index + 1][0] if index + 1 < len(bounds) else len(text)
        base = (
            "top"
            if index == 0 and start == 0 and (not starts or starts[0][0] > 0)
            else _slug(heading)
        )
        seen[base] = seen.get(base, 0) + 1
        ident = base if seen[base] == 1 else f"{base}-{seen[base]}"
        if text[start:end].strip():
            out.append(Section(ident, heading[:120], start, end))
    return tuple(out)


def _links(doc: etree._Element, page_url: str) -> tuple[Link, ...]:
    base = page_url
    for el in doc.iter("base"):
        href = (el.get("href") or "").strip()
        if href:
            with contextlib.suppress(ValueError):
                base = urljoin(page_url, href)
            break
    found: dict[str, str] = {}
    for el in doc.iter("a", "area"):
        href = re.sub(r"[\t\n\r]", "", el.get("href") or "").strip()
        if not href:
            continue
        try:
            url = canonical_url(urljoin(base, href))
        except ValueError:
            continue
        if not url.lower().startswith(("http://", "https://")) or "@" in url.split("/")[2]:
            continue  # javascript:, data:, mailto:, tel:, user info ... never become links
        label = _SPACE_RE.sub(" ", el.text_content() if el.tag == "a" else "").strip()
        label = label or (el.get("title") or el.get("aria-label") or el.get("alt") or "").strip()
        if url not in found or (not found[url] and label):
            found[url] = label[:LINK_TEXT_CHARS]
    return tuple(Link(url, text) for url, text in found.items())


def html_to_text(
    text: str, page_url: str
) -> tuple[str, str, tuple[Link, ...], tuple[Section, ...]]:
    """(title, text, links, sections) of an HTML document given as decoded text."""
    parser = lxml_html.HTMLParser(
        encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True
    )
    try:
        doc = lxml_html.document_fromstring(text.encode("utf-8", "replace"), parser=parser)
    except (etree.ParserError, ValueError):
        return "", "", (), ()
    title = _SPACE_RE.sub(" ", doc.findtext(".//title") or "").strip()[:200]
    links = _links(doc, page_url)
    for el in list(doc.iter(*DROPPED)):
        el.drop_tree()
    body = doc.find("body")
    lines = _render(body if body is not None else doc)
    if not title:
        title = next((line for level, line in lines if level), "")[:200]
    body_text, sections = _assemble(lines, title)
    return title, body_text, links, sections


def plain_sections(text: str, title: str) -> tuple[Section, ...]:
    """A plain-text page is one section, `top`."""
    return sections_from(text, [], title)
