"""docs/INTERNALS.md, the module map, generated from the tree and each module's docstring.

Each module's docstring gives its contract; its first paragraph is the map's line.
Tooling, not runtime: it reads the source files (tokens, no import) when called.
"""

from __future__ import annotations

import ast
import inspect
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The product's packages, in the order a newcomer meets them; tests/ and bench/ are not mapped.
PACKAGES: tuple[str, ...] = (
    "cli",
    "acp_server",
    "jev_harness",
    "kernel",
    "protocol",
    "host",
    "workers",
)
PACKAGES += ("jmp_lab", "apixly_jev_harness", "jmp_agent")

INTRO = """\
# Internals: the module map

<!-- Generated from the tree and each module's docstring by protocol/docgen/modules.py. Do not
     edit by hand: run `make docs`. A test fails when this file and the code disagree. -->

Every module of the product, folder by folder, with the first paragraph of its docstring (the
module's contract). What each folder owns and where to change what: ARCHITECTURE.md. The
messages between the processes: MESSAGES.md; the event log: EVENTS.md.

`main.py`: %(main)s
"""


def generate(root: Path = ROOT) -> str:
    """The whole of docs/INTERNALS.md for the tree at `root`."""
    parts = [INTRO % {"main": summary(root / "main.py")}]
    for package in PACKAGES:
        for folder in sorted({p.parent for p in (root / package).rglob("*.py")}):
            if "__pycache__" in folder.parts:
                continue
            parts.append(_folder(root, folder))
    return "\n".join(parts)


def summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line, `|` escaped for a table."""
    doc = _docstring(path) or "(no docstring)"
    return " ".join(doc.split("\n\n", 1)[0].split()).replace("|", "\\|")


def _docstring(path: Path) -> str:
    """The module docstring, read from the first tokens only (parsing 200 whole files is not
    free in a test suite at its budget)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING}
    with tokenize.open(path) as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type in skip:
                continue
            if token.type != tokenize.STRING:
                return ""
            value = ast.literal_eval(token.string)
            return inspect.cleandoc(value) if isinstance(value, str) else ""
    return ""


def _folder(root: Path, folder: Path) -> str:
    rel = folder.relative_to(root).as_posix()
    init = folder / "__init__.py"
    intro = summary(init) + "\n\n" if init.is_file() else ""
    rows = ["| module | contract |", "|---|---|"]
    for path in sorted(folder.glob("*.py")):
        if path.name != "__init__.py":
            rows.append(f"| `{path.name}` | {summary(path)} |")
    table = "\n".join(rows) + "\n" if len(rows) > 2 else ""
    return f"## {rel}/\n\n{intro}{table}"
