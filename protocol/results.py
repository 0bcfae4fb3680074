"""A run's result as every front end hands it over: one struct, whoever ran the run.

It is the `data` of the `result` line (`jmp --json`, `jev-harness run --json`:
docs/CONTRACT.md section 3, docs/HARNESS.md section 6), what `Agent.run` returns
(docs/CONTRACT.md section 4, as a dict) and what a harness session's `delegate()`/`close()` and
the MCP `run_task` tool return. Built in one place (kernel/run/ledger.py), summary redacted;
printed by one writer (kernel/display.py `json_line`, as the `data` of a protocol/lines.py
`Line`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.events import RunStatus


class RunResult(msgspec.Struct, kw_only=True, frozen=True):
    """`artifact` (a harness run's receipt, or None) is left out of an agent run's result:
    docs/CONTRACT.md section 4 names exactly four keys there."""

    session_id: str | None
    status: RunStatus
    summary: str
    session_dir: str | None
    artifact: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET

    def to_dict(self) -> dict[str, Any]:
        """The plain dict (an unset `artifact` left out) that front ends and callers get."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out
