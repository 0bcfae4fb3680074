"""The `state` of every harness request: compact UTF-8 JSON of at most STATE_BYTES.

It carries the goal, the limits, and the task's own observation (counts, the last eight
source and record summaries, one `last_read` window). When the observation is too large, its
longest strings are shortened step by step (marked with "…") and `clipped` says so; the goal
is never shortened: a goal that does not fit is refused before the run starts.
"""

from __future__ import annotations

import json
from typing import Any

from kernel.errors import UsageError

STATE_BYTES = 8_192
GOAL_BYTES = 4_000  # leaves room for the observation beside it


def check_goal(goal: str) -> None:
    """Refuse an empty goal or one too large for the state (give it `clean`ed)."""
    if not goal.strip():
        raise UsageError("the goal is empty")
    if len(goal.encode("utf-8", "surrogatepass")) > GOAL_BYTES:
        raise UsageError(f"the goal is longer than {GOAL_BYTES} bytes (UTF-8)")


def encode(value: Any) -> str:
    """Compact JSON, UTF-8 characters kept (lone surrogates escaped, never raised on)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def build_state(
    goal: str, limits: dict[str, Any], observation: dict[str, Any], context: Any = None
) -> str:
    """The state string; at most STATE_BYTES in UTF-8."""
    # The task's observation already carries goal and limits; the kernel's own values win.
    pinned: dict[str, Any] = {"goal": goal, "limits": limits}
    if context is not None:  # the caller's context may be shortened, never the goal
        observation = {**observation, "context": context}
    state: dict[str, Any] = {**observation, **pinned}
    text = encode(state)
    cap = 2_000
    while _bytes(text) > STATE_BYTES and cap >= 8:
        state = {**_shorten(observation, cap), "goal": goal, "limits": limits, "clipped": True}
        text = encode(state)
        cap //= 2
    if _bytes(text) > STATE_BYTES:
        text = encode({"goal": goal, "limits": limits, "clipped": True})
    return text


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _shorten(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= cap else value[: cap - 1] + "…"
    if isinstance(value, dict):
        return {k: _shorten(v, cap) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, cap) for v in value]
    return value
