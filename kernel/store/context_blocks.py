"""Embedded context in a request's text: the one format a front end writes it in (ACP's
embedded resources, acp_server/content.py) and the one the session catalog skips for a title.

A block is `\\n\\nContext from URI:\\n` + a fence + the text + the fence + `\\n`; the fence is
three backticks, or more than the longest run of backticks in the text (so the text cannot
close it early).
"""

from __future__ import annotations

import re

_BLOCK = re.compile(r"\n\nContext from [^\n]*:\n(`{3,})\n.*?\n\1\n", re.DOTALL)
_RUN = re.compile("`+")


def context_block(uri: str, text: str) -> str:
    longest = max((len(run) for run in _RUN.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"\n\nContext from {uri}:\n{fence}\n{text}\n{fence}\n"


def without_context(text: str) -> str:
    """The request with its context blocks left out (what the person typed)."""
    return _BLOCK.sub(" ", text)
