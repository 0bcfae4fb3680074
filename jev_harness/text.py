"""Text bounds shared by the library: clipped descriptions, opening words, display names. Text is
made encodable by the one `clean` (protocol/text.py, a stdlib-only leaf), redacted by the one
redactor (protocol/redact.py)."""

from __future__ import annotations

from protocol.text import clean

__all__ = ["ELLIPSIS", "MAX_DESCRIPTION_CHARS", "MAX_WINDOW_CHARS", "clean", "clip", "opening"]
MAX_DESCRIPTION_CHARS = 200  # an option description, a summary
MAX_WINDOW_CHARS = 1200  # original text in one window or outcome
ELLIPSIS = "…"


def clip(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """At most `limit` characters; a cut text ends with an ellipsis."""
    text = clean(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS


def opening(text: str, limit: int = 80) -> str:
    """The first words of a text on one line, clipped to `limit` characters."""
    return clip(" ".join(text.split()), limit)


def display_name(raw: bytes) -> str:
    """A file name for people and Jev: UTF-8 as is, other bytes escaped as \\xNN."""
    return raw.decode("utf-8", "backslashreplace")
