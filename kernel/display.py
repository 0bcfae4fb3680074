"""Text on its way to a person's terminal: control characters and escape sequences made inert.

Model text, tool output, file names and error messages can carry escape sequences (a terminal
title, a clear screen, cursor moves, 8-bit CSI) or bidi overrides that would act on the
terminal or disguise what is shown. The readable views print them as visible escapes
(`\\x1b`, `\\u202e`); newlines and tabs stay.

`json_line` is the one writer of a front end's own JSON line (the `result` line, the `sessions`
line: protocol/results.py `Line`), for the CLI, `jmp --list` and jev-harness alike.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from protocol.text import clean, cleaned

if TYPE_CHECKING:
    from protocol.redact import Redactor

# C0 controls but \t and \n, DEL, C1 controls (\x9b is a one-byte CSI on some terminals), and
# the bidi controls that reorder what is displayed.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as an escape; always encodable as UTF-8."""
    return clean(_UNSAFE.sub(_escape, text.replace("\r\n", "\n")))  # never a failed write


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: Any, redactor: Redactor) -> str:
    """`value` (builtins, or a protocol/lines.py `Line`) as one line of compact JSON: every
    string redacted and cleaned (protocol/text.py), non-ASCII kept, and every character that
    could act on a terminal written as a JSON escape, so the line decodes to the same value and
    is inert even on a terminal. Stdlib json: `jmp --list` starts without msgspec."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    data = cleaned(redactor.value(value))
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return _UNSAFE.sub(_json_escape, text)


def shown_result(data: Mapping[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A run's result (protocol/results.py RunResult as a dict) as a front end may show it:
    redacted, and a `session_id` that is no session id replaced by None, so that a given
    `--session ../../etc/passwd` is never echoed."""
    from kernel.store.catalog import is_session_id

    sid = data.get("session_id")
    shown = {**data, "session_id": sid if isinstance(sid, str) and is_session_id(sid) else None}
    out: dict[str, Any] = redactor.value(shown)
    return out


def json_line(
    kind: Literal["result", "sessions"], data: Mapping[str, Any], redactor: Redactor
) -> str:
    """The one writer of a `result` or `sessions` line (protocol/results.py `Line`), without
    its newline: a result's data through `shown_result`, the whole through `json_text`."""
    from protocol.lines import Line

    body = shown_result(data, redactor) if kind == "result" else dict(data)
    line = Line(session_id=body.get("session_id"), time=time.time(), kind=kind, data=body)
    return json_text(line, redactor)
