"""The one redactor of jmp: known secret values and the token formats, one rule set, one marker.

Everything that stores, prints or hands over text redacts it here: the kernel (its session's
log and artifacts, the front ends' printers, kernel/store/redact.py adds what the environment
holds), the workers (a provider's or an MCP server's error text) and jev_harness (a toolkit's
own key, a task's secrets). The rules (protocol/secrets.py): a known value counts from
MIN_SECRET_CHARS characters on (shorter ones would redact ordinary words and numbers), stripped;
a value that contains another is replaced whole; the token formats wherever they appear. A pure
function over str, so it lives in the shared leaf: stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from protocol.secrets import MIN_SECRET_CHARS, REDACTED, TOKEN_PATTERNS

__all__ = ["REDACTED", "Redactor", "redact", "refuse_short"]

_TOKENS = "|".join(TOKEN_PATTERNS)


class Redactor:
    """Replaces known secret values (>= MIN_SECRET_CHARS) and token formats with [REDACTED]."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern = re.compile(_TOKENS)
        self.add(*secrets)

    def add(self, *values: str | None) -> None:
        """Register more secret values; ignores empty and short ones."""
        fresh = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_CHARS}
        fresh -= self._secrets
        if not fresh:
            return
        self._secrets |= fresh
        # Longest first, so a secret that contains another is replaced whole.
        known = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join([*(re.escape(s) for s in known), _TOKENS]))

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def text(self, s: str) -> str:
        """The string with every secret and token replaced."""
        return self._pattern.sub(REDACTED, s)

    def value(self, obj: Any) -> Any:
        """A deep copy of dicts/lists/tuples with every string (keys too) redacted."""
        if isinstance(obj, str):
            return self._pattern.sub(REDACTED, obj)
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
