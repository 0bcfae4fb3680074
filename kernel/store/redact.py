"""The kernel's view of redaction: the one Redactor (protocol/redact.py) and the secrets the
environment holds (every key variable that is set), which only the kernel reads."""

from __future__ import annotations

import os
from collections.abc import Mapping

from protocol.redact import REDACTED, Redactor
from protocol.secrets import KEY_VARIABLES, TOKEN_PATTERNS

__all__ = ["REDACTED", "TOKEN_PATTERNS", "Redactor", "environment_secrets"]


def environment_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The value of every key variable that is set (protocol/secrets.py), used or not."""
    env = os.environ if env is None else env
    return tuple(v for v in (env.get(name, "") for name in KEY_VARIABLES) if v.strip())
