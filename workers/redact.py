"""The workers' one redaction: known secret values and the token formats, one marker.

The kernel's `Redactor` (kernel/store/redact.py) does the same for everything the kernel
stores or prints; workers may not import the kernel, so this is its twin on the worker side,
built from the same vocabulary (protocol/secrets.py: the token patterns and the marker).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from protocol.secrets import REDACTED, TOKEN_PATTERNS

_TOKENS = re.compile("|".join(TOKEN_PATTERNS))


def redact(text: str, *secrets: str | Iterable[str]) -> str:
    """`text` with every non-empty secret (longest first) and every token format replaced by
    [REDACTED]; `secrets` may be strings or iterables of strings."""
    known: set[str] = set()
    for item in secrets:
        known.update([item] if isinstance(item, str) else item)
    for secret in sorted((s for s in known if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _TOKENS.sub(REDACTED, text)
