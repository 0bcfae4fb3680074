"""`usage_update` from the recorded `usage` events: the context Flash last held, and the
session's token totals.

`used` is the provider-reported size of the latest Flash request and its reply (its
`total_tokens`, else prompt plus completion tokens): what the generator, which sees the larger
context, last held. `size` is jmp's own bound on that context, `FLASH_CONTEXT_BYTES`: jmp fits
the context in bytes and a token covers at least one byte, so the budgeted context never holds
more tokens than that; the model's own window is not known to jmp. No `cost`: jmp knows no
prices. `_meta.jmp` adds the session's totals over every model request (Jev's too) that this
process has seen. Nothing is sent before a Flash request has reported its usage.
"""

from __future__ import annotations

from typing import Any

from acp.schema import UsageUpdate

from protocol.events import UsageData

TYPESAFE = "typesafe"  # Jev's provider name in `usage` records (kernel/supervision/router.py)


def tokens(usage: dict[str, Any], *names: str) -> int:
    """The first of names that is a whole number >= 0 in a provider's usage, else 0."""
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


class UsageMeter:
    """The usage of one session as updates (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = max(0, size)
        self.used: int | None = None
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def feed(self, data: UsageData) -> UsageUpdate | None:
        """Fold one usage record; the update it makes (None until Flash has reported)."""
        usage = data.usage if isinstance(data.usage, dict) else {}
        self.requests += 1
        given = tokens(usage, "prompt_tokens", "input_tokens")
        made = tokens(usage, "completion_tokens", "output_tokens")
        self.input_tokens += given
        self.output_tokens += made
        if data.provider != TYPESAFE and (given or made):
            self.used = tokens(usage, "total_tokens") or given + made
        return self.update()

    def held(self, data: UsageData) -> None:
        """The context of a Flash request recorded before this process (an opened session)."""
        usage = data.usage if isinstance(data.usage, dict) else {}
        given = tokens(usage, "prompt_tokens", "input_tokens")
        made = tokens(usage, "completion_tokens", "output_tokens")
        if data.provider != TYPESAFE and (given or made):
            self.used = tokens(usage, "total_tokens") or given + made

    def update(self) -> UsageUpdate | None:
        if self.used is None:
            return None
        meta = {
            "jmp": {
                "requests": self.requests,
                "inputTokens": self.input_tokens,
                "outputTokens": self.output_tokens,
                "sizeIs": "FLASH_CONTEXT_BYTES, jmp's context budget (a token is at least a byte)",
            }
        }
        return UsageUpdate(
            session_update="usage_update", used=self.used, size=self.size, field_meta=meta
        )
