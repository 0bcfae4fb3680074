"""A hostile launch directory: a module there for every name an import could look up.

`plant(directory, witness)` writes, for every top-level module name of the standard library,
of every installed distribution and of jmp itself, a file that, once imported, prints a
WITNESS line on fd 2 and leaves a file `witness/NAME.witness` (when it can write): whichever of
jmp's processes imports anything from the directory leaves a trace, whatever it imports.
jmp's own packages (`workers`, `protocol`, `kernel`, ...) are packages (`NAME/__init__.py`),
everything else a `NAME.py`.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterable
from pathlib import Path

WITNESS = "LAUNCH-DIR-WITNESS"
OURS = (
    "workers",
    "protocol",
    "host",
    "kernel",
    "cli",
    "acp_server",
    "jev_harness",
    "apixly_jev_harness",
    "tests",
    "bench",
    "jmp_lab",
)
# Named by the issue; the rest follow from the interpreter and the installed distributions.
NAMED = ("zmq", "queue", "argparse", "msgspec", "main", "mcp", "typing")

_BODY = """\
import posix as _p
_p.write(2, b"{witness} {name}\\n")
try:
    _p.close(_p.open({path!r}, _p.O_WRONLY | _p.O_CREAT, 0o600))
except OSError:
    pass
"""


def names() -> set[str]:
    """Every top-level name worth planting: stdlib, installed distributions, jmp's packages."""
    found = set(sys.stdlib_module_names) | set(NAMED) | set(OURS)
    found |= set(importlib.metadata.packages_distributions())
    return {n for n in found if n.isidentifier() and n not in ("__main__", "this")}


def plant(directory: Path, witness: Path, skip: Iterable[str] = ()) -> Path:
    """Fill `directory` with witness modules (all `names()` but `skip`); `witness` is made."""
    witness.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    for name in sorted(names() - set(skip)):
        path = str(witness / name)
        body = _BODY.format(witness=WITNESS, name=name, path=path + ".witness")
        if name in OURS:
            (directory / name).mkdir(exist_ok=True)
            (directory / name / "__init__.py").write_text(body)
        else:
            (directory / f"{name}.py").write_text(body)
    return directory


def traces(witness: Path, *outputs: str) -> list[str]:
    """What the planted modules left: witness files and WITNESS lines in the given outputs."""
    found = sorted(p.name for p in witness.iterdir()) if witness.exists() else []
    for text in outputs:
        found += [line for line in text.splitlines() if WITNESS in line]
    return found
