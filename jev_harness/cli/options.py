"""The options a harness run takes on both of its command lines (`jev-harness run` and
`python -m jev_harness.mcp`): one spelling, one parse, one message per mistake (exit 2)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from protocol.limits import LimitsError, ScriptLimits, from_env


class UsageError(Exception):
    """A wrong command line (or a server that cannot start), named (exit 2)."""


def add_run_options(p: argparse.ArgumentParser) -> None:
    """--goal, --inputs, --context, --max-steps, --timeout, --sessions-dir."""
    p.add_argument("--goal", required=True, metavar="TEXT", help="what the task is to achieve")
    p.add_argument(
        "--inputs", required=True, metavar="JSON", help="the object the script's build() gets"
    )
    p.add_argument("--context", metavar="JSON", help="any JSON value Jev sees beside the goal")
    p.add_argument(
        "--max-steps",
        type=int,
        default=20,
        metavar="N",
        help="executed operations allowed (default 20; the entry capture is not counted)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="wall-clock seconds for the run (default 120)",
    )
    p.add_argument(
        "--sessions-dir", metavar="PATH", help="session storage (or JMP_SESSIONS_DIR; see jmp -h)"
    )


def json_arg(flag: str, text: str | None, *, obj: bool) -> Any:
    """Parse --inputs / --context (None when absent), naming the flag in the error."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc}") from None
    if obj and not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def check_limits(args: argparse.Namespace) -> None:
    """UsageError for --max-steps below 1, a --timeout that is not a positive number, or a
    JEV_HARNESS_* resource limit that is not valid (named)."""
    if args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    script_limits()


def script_limits() -> ScriptLimits:
    """The task scripts' resource limits from the environment; UsageError names a bad one."""
    try:
        return from_env()
    except LimitsError as exc:
        raise UsageError(str(exc)) from None
