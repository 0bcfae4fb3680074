"""The kernel's view of redaction: the one Redactor (protocol/redact.py) and the secrets the
environment holds (every key variable that is set), which only the kernel reads."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Mapping
from typing import TextIO

from protocol.redact import REDACTED, Redactor
from protocol.secrets import KEY_VARIABLES, TOKEN_PATTERNS

__all__ = ["REDACTED", "TOKEN_PATTERNS", "Redactor", "debug_traceback", "environment_secrets"]


def environment_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The value of every key variable that is set (protocol/secrets.py), used or not."""
    env = os.environ if env is None else env
    return tuple(v for v in (env.get(name, "") for name in KEY_VARIABLES) if v.strip())


def debug_traceback(exc: BaseException, redactor: Redactor, stream: TextIO | None = None) -> None:
    """With JMP_DEBUG=1, EXC's traceback on stderr: redacted like everything else a front end
    prints (an exception's message, or a local shown in it, can hold a key) and made inert for
    a terminal. Every front end's one way to show a traceback."""
    if os.environ.get("JMP_DEBUG") != "1":
        return
    from kernel.display import terminal_safe

    text = "".join(traceback.format_exception(exc))
    out = sys.stderr if stream is None else stream
    out.write(terminal_safe(redactor.text(text)))
    out.flush()
