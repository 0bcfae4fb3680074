"""jmp entry point: `python main.py --json "task"` (the same CLI as the `jmp` console script).

Also the Python boundary of docs/CONTRACT.md section 4 as the contract spells it, `from main import
Session, Models, Tools, Agent, Settings, ContextPolicy, load_servers, instructions`: the same
names as `jmp_agent` (its one home, jmp_agent/__init__.py), the import name to use in an
application (one with a `main.py` of its own cannot import this one). Nothing of jmp's imports
this module.
"""

from __future__ import annotations

import sys

from jmp_agent import __getattr__  # noqa: F401 (the lazy re-exports of the boundary)

if __name__ == "__main__":
    from cli.main import main

    sys.exit(main(sys.argv[1:]))
