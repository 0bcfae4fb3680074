"""The one redactor of jmp: known secret values and the token formats, one rule set, one marker.

Everything that stores, prints or hands over text redacts it here: the kernel (its session's
log and artifacts, the front ends' printers, kernel/store/redact.py adds what the environment
holds), the workers (a provider's or an MCP server's error text) and jev_harness (a toolkit's
own key, a task's secrets). The rules (protocol/secrets.py): a known value counts from
MIN_SECRET_CHARS characters on (shorter ones would redact ordinary words and numbers), stripped;
its common encodings (base64, hex, percent: `encoded_forms`) count as the value; a value
that contains another is replaced whole; the token formats wherever they appear. A pure
function over str, so it lives in the shared leaf: stdlib only.

The encoded forms are many literals (about eight per secret) that almost never occur, and one
alternation of them with the raw values would make every call 3 to 37 times slower
(bench/redact.py): instead each form present (one `in` per form, at memory speed) is replaced
by `str.replace`, longest first, and then the raw values and the token formats by their one
pattern, as before.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

from protocol.secrets import MIN_SECRET_CHARS, REDACTED, TOKEN_PATTERNS

__all__ = [
    "MIN_ENCODED_SECRET_CHARS",
    "REDACTED",
    "Redactor",
    "encoded_forms",
    "redact",
    "refuse_short",
]

_TOKENS = "|".join(TOKEN_PATTERNS)

MIN_ENCODED_SECRET_CHARS = 12

_PERCENT_HEX = re.compile(r"%[0-9A-F]{2}")
# For a secret starting at byte `a` of a 3-byte group: the leading characters that hold bits of
# the bytes before it (8a bits: ceil(8a / 6) characters) ...
_SKIP = {0: 0, 1: 2, 2: 3}
# ... and, for a secret ending `r` bytes into a group, the trailing characters that hold bits of
# the bytes after it (r = 1: the 2nd of 2 characters; r = 2: the 3rd of 3).
_TAIL = {0: 0, 1: 1, 2: 1}


def base64_runs(raw: bytes) -> list[str]:
    """The stable inner run of raw's standard base64 in each of the three alignments."""
    runs = []
    for a in range(3):
        text = base64.b64encode(b"\0" * a + raw).decode("ascii").rstrip("=")
        tail = _TAIL[(a + len(raw)) % 3]
        runs.append(text[_SKIP[a] : len(text) - tail])
    return runs


def _percent_lower(text: str) -> str:
    return _PERCENT_HEX.sub(lambda m: m.group(0).lower(), text)


def encoded_forms(secret: str) -> frozenset[str]:
    """Every encoded form of `secret` the redactor replaces; never the secret itself.

    A shell or a task script can print a key it read from a file (`.env`) base64-, hex- or
    percent-encoded, past a redactor that knows only the raw value. The forms are those whose
    text depends on the secret alone:

    - base64, standard and URL-safe alphabets, padded or not: the secret may start at byte 0, 1
      or 2 of a 3-byte group of the encoded stream (what precedes it is unknown), so for each
      alignment the form is the *stable inner run*, the characters all 6 bits of which are the
      secret's (`base64_runs`). What surrounds the run (at most 3 characters either side, partly
      the neighbours' bits) stays; padding is outside every run, so `=` or none is one form;
    - hex of the UTF-8 bytes, lower and upper case;
    - percent-encoding of every byte (`%6B%65...`), and of only the reserved characters as
      `urllib.parse.quote` does (`safe="/"`, `safe=""`, `quote_plus`), hex digits in either
      case, where that differs from the raw value.

    None for a secret under MIN_ENCODED_SECRET_CHARS characters: the shortest form is then a
    15-character base64 run (90 bits of the secret), where a 6-character secret's would be 7
    characters of the alphabet identifiers and base64 payloads are made of. Keys are long (the
    vendors' 32 characters and more)."""
    if len(secret) < MIN_ENCODED_SECRET_CHARS:
        return frozenset()
    raw = secret.encode("utf-8")
    found: set[str] = set()
    for run in base64_runs(raw):
        found |= {run, run.translate(str.maketrans("+/", "-_"))}
    found |= {raw.hex(), raw.hex().upper()}
    every = "".join(f"%{b:02X}" for b in raw)
    for text in (every, quote(secret, safe="/"), quote(secret, safe=""), quote_plus(secret)):
        found |= {text, _percent_lower(text)}
    found.discard(secret)
    return frozenset(found)


def _alternation(literals: Iterable[str]) -> re.Pattern[str]:
    """The literals, longest first (a secret that contains another is replaced whole), then the
    token formats."""
    known = sorted(literals, key=len, reverse=True)
    return re.compile("|".join([*(re.escape(s) for s in known), _TOKENS]))


class Redactor:
    """Replaces known secret values (>= MIN_SECRET_CHARS), their encoded forms and the token
    formats with [REDACTED]."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._encoded: tuple[str, ...] = ()  # the secrets' encoded forms, longest first
        self._shortest = 0  # the length of the shortest form
        self._pattern = re.compile(_TOKENS)
        self.add(*secrets)

    def add(self, *values: str | None) -> None:
        """Register more secret values; ignores empty and short ones."""
        fresh = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_CHARS}
        fresh -= self._secrets
        if not fresh:
            return
        self._secrets |= fresh
        forms = set().union(*(encoded_forms(s) for s in self._secrets)) - self._secrets
        self._encoded = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        self._shortest = min(map(len, forms), default=0)
        self._pattern = _alternation(self._secrets)

    @property
    def secrets(self) -> frozenset[str]:
        """The raw values (what a copy of this redactor is made from)."""
        return frozenset(self._secrets)

    @property
    def forms(self) -> frozenset[str]:
        """Every literal replaced: the raw values and their encoded forms (what a stream must
        hold back while one may still be arriving: acp_server/stream.py)."""
        return frozenset(self._secrets).union(self._encoded)

    def text(self, s: str) -> str:
        """The string with every secret, encoded form of one, and token replaced."""
        if len(s) >= self._shortest:  # most strings of a record are shorter than any form
            for form in self._encoded:
                if form in s:
                    s = s.replace(form, REDACTED)
        return self._pattern.sub(REDACTED, s)

    def value(self, obj: Any) -> Any:
        """A deep copy of dicts/lists/tuples with every string (keys too) redacted."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.value(v) for v in obj)
        return obj


def refuse_short(secrets: Iterable[str]) -> None:
    """ValueError when a non-empty one of `secrets` is too short for the rule, which would pass
    it unredacted: for secrets given by name (a task's), where a refusal beats a silent leak."""
    short = sum(bool(s) and len(s.strip()) < MIN_SECRET_CHARS for s in secrets)
    if short:
        raise ValueError(
            f"{short} of the secrets given is shorter than {MIN_SECRET_CHARS} characters: "
            "too short to redact without redacting ordinary words"
        )


def redact(text: str, *secrets: str | Iterable[str]) -> str:
    """`text` through a Redactor of `secrets` (strings or iterables of strings): for a text
    redacted once (an error message), where no redactor is kept."""
    known: list[str] = []
    for item in secrets:
        known.extend([item] if isinstance(item, str) else item)
    return Redactor(known).text(text)
