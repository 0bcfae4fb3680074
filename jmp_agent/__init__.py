"""jmp's Python API (docs/CONTRACT.md section 4) under an import name of its own: `from jmp_agent
import Session, Models, Tools, Agent, Settings, ContextPolicy, load_servers, instructions`, the
door every front end uses, `open_agent` (kernel/loop/opening.py: admission, keys, secrets,
create or open, the workspace check, Models, Tools and Agent in one call), and `sessions_home`
(where `jmp` keeps sessions). The distribution's name, `jmp-agent`: an application with a
`main.py` of its own can import it (`from main import ...`, the contract's spelling, is the same
table, main.py re-exports it). Nothing of jmp's imports this package.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: `python main.py --version` imports this module
if TYPE_CHECKING:
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
    "sessions_home": "kernel.store.catalog",
}
__all__ = sorted(_BOUNDARY)


def __getattr__(name: str) -> Any:
    """Lazy re-exports, so that `python main.py --list` imports nothing it does not need."""
    module = _BOUNDARY.get(name)
    if module is None:
        raise AttributeError(f"module 'jmp_agent' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
