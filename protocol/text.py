"""Text that UTF-8 can always carry (`clean`), and cuts that never keep part of a secret. Pure
functions over str, stdlib only: the shared leaf the kernel, the workers and jev_harness import.

Python hands undecodable file-name bytes over as lone surrogates (surrogateescape), and a model's
JSON may carry a lone `\\ud800`; neither can be encoded as UTF-8, so a frame or a log line holding
one would fail to encode. `clean` turns such text into something every writer accepts, with
one rule for every source.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_surrogates(text: str) -> bool:
    """True when `text` holds a lone surrogate (it cannot be encoded as UTF-8)."""
    return _SURROGATE.search(text) is not None


def text_problem(value: str, header: bool = False) -> str | None:
    """What makes `value` unfit for a path, an argument or an environment entry (or, with
    `header`, an HTTP header), said so it can follow a field's name; None when it is fit: a
    NUL, a lone surrogate (JSON can spell one, UTF-8 cannot), a line break in a header."""
    if "\x00" in value:
        return "contains a NUL character, which no path or argument can hold"
    surrogate = _SURROGATE.search(value)
    if surrogate is not None:
        return f"contains a lone surrogate (U+{ord(surrogate.group()):04X}), which is not text"
    if header and ("\r" in value or "\n" in value):
        return "contains a line break, which no HTTP header can hold"
    return None


def clean(text: str) -> str:
    """`text` as UTF-8 can always carry it: the one cleaning of lone surrogates, wherever text
    comes from. One that stands for a byte that was not UTF-8 (surrogateescape's U+DC80-U+DCFF:
    a file name, a command's output, an argument) is written `\\xNN`, so the byte stays
    readable; any other (a model's or an editor's `\\ud800`) becomes U+FFFD."""
    if not has_surrogates(text):
        return text
    return _SURROGATE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's range: one undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return REPLACEMENT


def first_surrogate(value: Any, path: str = "") -> str | None:
    """Where in a JSON-like value the first lone surrogate is (`path[key]...`), else None."""
    if isinstance(value, str):
        match = _SURROGATE.search(value)
        return f"{path or 'value'} character {match.start()}" if match else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = first_surrogate(key, f"{path}[key]") or first_surrogate(
                item, f"{path}[{key!r}]"
            )
            if where:
                return where
    if isinstance(value, list):
        for n, item in enumerate(value):
            where = first_surrogate(item, f"{path}[{n}]")
            if where:
                return where
    return None


def cleaned(value: Any) -> Any:
    """A builtins value (dicts, lists, strings, ...) with every string passed through `clean`."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {cleaned(k): cleaned(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [cleaned(v) for v in value]
    return value


# --- cutting text that may hold a secret ------------------------------------------------------
# A redactor replaces whole secrets; a cut through one leaves a part it cannot recognize. So a
# cut never keeps a part of a word (a run of non-space characters) longer than this: the live
# view's tail of a running command, and its lines clipped to the terminal's width.
PARTIAL_WORD_KEPT = 5
_LAST_WORD = re.compile(r"\S+\Z")
_FIRST_WORD = re.compile(r"\A\S+")


def head(text: str, chars: int, *, open_end: bool = False) -> str:
    """At most `chars` characters of the start of `text`; a word cut at the end is dropped
    when more than PARTIAL_WORD_KEPT of it would show. `open_end`: `text` may go on (a stream
    still being written), so its last word counts as cut unless whitespace follows it."""
    cut = len(text) > chars
    kept = text[:chars]
    if (cut and not text[chars].isspace()) or (open_end and not cut):
        word = _LAST_WORD.search(kept)
        if word is not None and len(word.group()) > PARTIAL_WORD_KEPT:
            kept = kept[: word.start()]
    return kept


def tail(text: str, chars: int, *, open_start: bool = False) -> str:
    """At most `chars` characters of the end of `text`; a word cut at the start is dropped
    when more than PARTIAL_WORD_KEPT of it would show. `open_start`: `text` is itself the end
    of something longer, so its first word counts as cut."""
    if len(text) <= chars and not open_start:
        return text
    kept = text[max(len(text) - chars, 0) :]
    if (open_start and len(text) <= chars) or not text[len(text) - chars - 1].isspace():
        word = _FIRST_WORD.search(kept)
        if word is not None and len(word.group()) > PARTIAL_WORD_KEPT:
            kept = kept[word.end() :]
    return kept
