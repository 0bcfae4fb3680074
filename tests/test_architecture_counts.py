"""One home for each mechanism, counted with `ast` over the product's source: the records of a
call and of a run's end have one constructor each (kernel/run/ledger.py), and a run ends by one
exception class. (The import-graph rules between rooms are in test_import_graph.py.)"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("kernel", "protocol", "host", "workers", "cli", "acp_server", "jev_harness", "jmp_lab")
LEDGER = "kernel/run/ledger.py"
# Each record whose every instance a run writes through the ledger: built there alone.
ONE_CONSTRUCTOR = {"ToolStartedData": LEDGER, "ToolUncertainData": LEDGER, "FinalData": LEDGER}


def _sources() -> dict[str, ast.Module]:
    files = [ROOT / "main.py", *(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py"))]
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text()) for p in files}


def constructors(sources: dict[str, ast.Module], names: set[str]) -> dict[str, set[str]]:
    """name -> the modules that call it (`Name(...)` or `module.Name(...)`)."""
    found: dict[str, set[str]] = defaultdict(set)
    for path, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called in names:
                    found[called].add(path)
    return found


def test_each_call_and_end_record_has_one_constructor() -> None:
    found = constructors(_sources(), set(ONE_CONSTRUCTOR))
    assert {name: sorted(paths) for name, paths in found.items()} == {
        name: [home] for name, home in ONE_CONSTRUCTOR.items()
    }


def test_a_run_ends_by_one_exception_class() -> None:
    classes = [
        path
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "RunEnded"
    ]
    assert classes == [LEDGER]


def test_the_counter_counts() -> None:
    tree = ast.parse(
        "from x import FinalData\nFinalData(status='x')\nprotocol.events.FinalData()\n"
    )
    assert constructors({"a.py": tree, "b.py": ast.parse("FinalData")}, {"FinalData"}) == {
        "FinalData": {"a.py"}
    }


def test_an_agent_is_composed_behind_one_door() -> None:
    """Session, Models, Tools and Agent are put together in one place for every front end
    (kernel/loop/opening.py `open_agent`); a harness run has its own (kernel/harness/)."""
    names = {"Agent", "Models", "Tools"}
    found = constructors(_sources(), names)
    assert {name: sorted(paths) for name, paths in found.items()} == {
        name: ["kernel/loop/opening.py"] for name in names
    }
