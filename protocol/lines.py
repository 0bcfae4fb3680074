"""The lines a front end writes on stdout that are no event of a session: a protocol type.

The `result` line (`jmp --json`, `jev-harness run --json`: docs/CONTRACT.md section 3,
docs/HARNESS.md section 6) and `jmp --list --json`'s `sessions` line carry the event envelope's
fields in its order, `seq` always null. Written by kernel/display.py `json_line` alone
(redacted, the id checked, terminal-safe). A stdlib dataclass (the shared leaf: `jmp --list`
loads no msgspec).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, kw_only=True)
class Line:
    """One front-end line; `data` is a run's result (protocol/results.py RunResult as a dict)
    for `result`, `{"sessions": [...]}` for `sessions`."""

    version: int = 1
    session_id: str | None = None
    seq: None = None
    time: float
    kind: Literal["result", "sessions"]
    data: dict[str, Any]


@dataclass(slots=True)
class SessionRow:
    """One session in `jmp --list --json`'s `sessions` line (kernel/store/catalog.py makes
    them): `status` is the last `final`'s, else `new`, `running` or `unreadable`; `events`
    counts records; `title` is the first request, on one line, cut at 80 characters."""

    session_id: str
    workspace: str
    status: str
    last_activity: float | None
    events: int
    title: str

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}


# The longest JSON-RPC line a stdio server of ours reads (`jmp --acp`: acp_server/wire.py;
# `jev-harness-mcp`: jev_harness/mcp/stdio.py). A longer one is discarded up to its newline,
# never held whole, and answered -32600. A prompt fits the router's context (~28 kB) many
# times over.
MAX_LINE_BYTES = 16 * 1024 * 1024
