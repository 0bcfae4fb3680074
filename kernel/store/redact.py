"""Redaction of known secrets and unmistakable token formats, before anything is stored."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 6  # shorter values would redact ordinary words and numbers

# Formats no prose or code contains by accident. Kept short on purpose: a broad pattern would
# eat hashes, ids and file contents the agent needs to see verbatim.
TOKEN_PATTERNS = (
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}",  # OpenAI, DeepSeek, Anthropic style keys
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
    r"(?<=[Bb]earer )[A-Za-z0-9._~+/=-]{20,}",  # the token only: "Bearer" stays readable
)


class Redactor:
    """Replaces known secret values (>= 6 chars) and token formats with [REDACTED]."""

    def __init__(self, secrets: tuple[str, ...] | list[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern = re.compile("|".join(TOKEN_PATTERNS))
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
        alternatives = [re.escape(s) for s in known] + list(TOKEN_PATTERNS)
        self._pattern = re.compile("|".join(alternatives))

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
