"""Redaction of known secrets and unmistakable token formats, before anything is stored."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from protocol.secrets import KEY_VARIABLES, MIN_SECRET_CHARS, REDACTED, TOKEN_PATTERNS

__all__ = ["REDACTED", "TOKEN_PATTERNS", "Redactor", "environment_secrets"]


def environment_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The value of every key variable that is set (protocol/secrets.py), used or not."""
    env = os.environ if env is None else env
    return tuple(v for v in (env.get(name, "") for name in KEY_VARIABLES) if v.strip())


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
