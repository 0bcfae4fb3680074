"""jmp entry point: `python main.py --json "task"` (the same CLI as the `jmp` console script).

Also the Python boundary of CONTRACT.md section 4: `from main import Session, Models, Tools,
Agent, Settings, ContextPolicy, load_servers, instructions`.
"""

from __future__ import annotations

import sys
from typing import Any

INSTRUCTIONS = """\
You are jmp, a careful local coding agent working in the user's workspace.
Work step by step with the tools offered: read files before editing them, make the smallest
change that does what the user asked, and run the project's own commands to check your work.
Facts come only from tool results in this session; earlier answers are conversation, not
evidence. A call whose outcome is uncertain (interrupted) was not re-run: check its effect
before relying on it. Never invent tool output. When the request is done, or when you need
the user, say so plainly. Paths are relative to the workspace unless absolute inside it."""


def instructions() -> str:
    """The system instructions given to both models."""
    return INSTRUCTIONS


_BOUNDARY = {
    "Session": "kernel.store.session",
    "Models": "kernel.supervision.models",
    "Tools": "kernel.supervision.tools",
    "Agent": "kernel.loop.agent",
    "Settings": "kernel.config.settings",
    "ContextPolicy": "kernel.context.policy",
    "load_servers": "kernel.config.mcp",
}


def __getattr__(name: str) -> Any:
    """Lazy re-exports, so that `python main.py --list` imports nothing it does not need."""
    module = _BOUNDARY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)


if __name__ == "__main__":
    from cli.main import main

    sys.exit(main(sys.argv[1:]))
