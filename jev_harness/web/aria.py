"""Readable text from an accessibility snapshot: Playwright's `ariaSnapshot()` YAML, which
camofox-browser returns (with `[eN]` element refs added) and ChromiumProvider takes itself.

A snapshot line is `- role "name" [attr]... [eN]: value` (the name, the attributes and the value
each optional; a key that needs quoting is wrapped in single quotes, a value in double quotes).
What a reader needs is kept: headings as `#` lines (their offsets become sections), the text of
paragraphs, list items, cells, links and plain text, and `role: name` for the other controls.
What is noise is dropped: container lines with nothing of their own (`- main:`, `- list:`,
`- listitem:` whose content is on the lines below), properties (`- /url: ...`, which the links
repeat), the quotes around values, attributes (`[level=2]`, `[checked]`) and refs (`[e12]`).
"""

from __future__ import annotations

import json
import re

_ITEM_RE = re.compile(r"^\s*-\s+(.*)$")
_KEY_RE = re.compile(r'^([\w-]+)(?:\s+("(?:[^"\\]|\\.)*"))?((?:\s*\[[^\]]*\])*)\s*(:?)\s*(.*)$')
_LEVEL_RE = re.compile(r"\[level=(\d)\]")
_REF_RE = re.compile(r"\s*\[e\d+\]")
TEXT_ROLES = frozenset(
    {
        "text",
        "paragraph",
        "listitem",
        "cell",
        "gridcell",
        "generic",
        "link",
        "strong",
        "emphasis",
        "code",
        "blockquote",
        "caption",
        "term",
        "definition",
        "time",
        "mark",
        "superscript",
        "subscript",
        "deletion",
        "insertion",
        "columnheader",
        "rowheader",
    }
)


def _unquote(value: str) -> str:
    """A YAML scalar as Playwright writes it: double-quoted (JSON escapes) or plain."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            out = json.loads(value)
            return out if isinstance(out, str) else value
        except json.JSONDecodeError:
            return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def _split_key(item: str) -> tuple[str, str]:
    """(key, rest) of an item; a single-quoted key (`'link "a: b"': text`) is unwrapped."""
    if not item.startswith("'"):
        return item, ""
    i = 1
    while i < len(item):
        if item[i] == "'":
            if item[i + 1 : i + 2] == "'":
                i += 2
                continue
            return item[1:i].replace("''", "'"), item[i + 1 :]
        i += 1
    return item, ""


def _line(item: str) -> tuple[str, str | None]:
    """(text of one snapshot item, heading name if it is one); "" for a line of noise."""
    key, rest = _split_key(item)
    match = _KEY_RE.match(key + rest)
    if match is None:
        return _REF_RE.sub("", item).strip(), None
    role, name, attrs, _colon, value = match.groups()
    name = _unquote(name) if name else ""
    value = _unquote(value) if value else ""
    if role == "heading":
        level = _LEVEL_RE.search(attrs or "")
        heading = " ".join((name or value).split())
        return "#" * int(level.group(1) if level else 2) + " " + heading, heading
    words = " ".join(w for w in (name, value) if w).strip()
    if not words:
        return "", None  # a container: its content is on the lines below
    if role in TEXT_ROLES:
        return words, None
    if role == "img":
        return f"image: {words}", None
    return f"{role}: {words}", None


def snapshot_text(snapshot: str) -> tuple[str, list[tuple[int, str]]]:
    """Readable text from an accessibility snapshot, and (offset, heading) of its headings."""
    out: list[str] = []
    starts: list[tuple[int, str]] = []
    offset = 0
    for raw in snapshot.splitlines():
        item = _ITEM_RE.match(raw)
        if item is None:
            line, heading = _REF_RE.sub("", raw).strip(), None
        elif item.group(1).startswith("/"):
            continue  # properties such as `- /url: ...` repeat what the links give
        else:
            line, heading = _line(item.group(1))
        if not line:
            continue
        if heading is not None:
            starts.append((offset, heading))
        out.append(line + "\n")
        offset += len(line) + 1
    return "".join(out), starts
