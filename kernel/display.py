"""Text on its way to a person's terminal: control characters and escape sequences made inert.

Model text, tool output, file names and error messages can carry escape sequences (a terminal
title, a clear screen, cursor moves, 8-bit CSI) or bidi overrides that would act on the
terminal or disguise what is shown. The readable views print them as visible escapes
(`\\x1b`, `\\u202e`); newlines and tabs stay.
"""

from __future__ import annotations

import re

from protocol.text import clean

# C0 controls but \t and \n, DEL, C1 controls (\x9b is a one-byte CSI on some terminals), and
# the bidi controls that reorder what is displayed.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as an escape; always encodable as UTF-8."""
    return clean(_UNSAFE.sub(_escape, text.replace("\r\n", "\n")))  # never a failed write


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
