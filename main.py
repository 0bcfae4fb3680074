"""jmp entry point: `python main.py --json "task"` (the same CLI as the `jmp` console script).

Also the Python boundary of CONTRACT.md section 4: `from main import Session, Models, Tools,
Agent, Settings, ContextPolicy, load_servers, instructions`, and the door every front end uses,
`open_agent` (kernel/loop/opening.py: admission, keys, secrets, create or open, the workspace
check, Models, Tools and Agent in one call). Nothing of jmp's imports this module.
"""

from __future__ import annotations

import sys
from typing import Any

_BOUNDARY = {
    "Session": "kernel.store.session",
    "Models": "kernel.supervision.models",
    "Tools": "kernel.supervision.tools",
    "Agent": "kernel.loop.agent",
    "Settings": "kernel.config.settings",
    "ContextPolicy": "kernel.context.policy",
    "load_servers": "kernel.config.mcp",
    "instructions": "kernel.loop.prompts",
    "INSTRUCTIONS": "kernel.loop.prompts",
    "open_agent": "kernel.loop.opening",
    "Planned": "kernel.loop.opening",
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
