"""Text bounds shared by the library: clean Unicode, clipped descriptions, opening words, and
the library's one redaction of known secrets."""

from __future__ import annotations

from collections.abc import Iterable

MAX_DESCRIPTION_CHARS = 200  # an option description, a summary
MAX_WINDOW_CHARS = 1200  # original text in one window or outcome
ELLIPSIS = "…"
# The marker of protocol/secrets.py (this library imports the stdlib only; a test keeps the two
# equal): the harness worker's own redaction (workers/redact.py) uses the same.
REDACTED = "[REDACTED]"


def clean(text: str) -> str:
    """The text with lone surrogates written as escapes, so it always encodes as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def clip(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """At most `limit` characters; a cut text ends with an ellipsis."""
    text = clean(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-empty secret (longest first) replaced by [REDACTED]."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def opening(text: str, limit: int = 80) -> str:
    """The first words of a text on one line, clipped to `limit` characters."""
    return clip(" ".join(text.split()), limit)


def display_name(raw: bytes) -> str:
    """A file name for people and Jev: UTF-8 as is, other bytes escaped as \\xNN."""
    return raw.decode("utf-8", "backslashreplace")
