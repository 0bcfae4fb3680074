"""One home for each mechanism, counted with `ast` over the product's source: the records of a
call and of a run's end have one constructor each (kernel/run/ledger.py), and a run ends by one
exception class. (The import-graph rules between rooms are in test_import_graph.py.)"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("kernel", "protocol", "host", "workers", "cli", "acp_server", "jev_harness", "jmp_lab")
LEDGER = "kernel/run/ledger.py"
# Each record whose every instance a run writes through the ledger: built there alone.
ONE_CONSTRUCTOR = {"ToolStartedData": LEDGER, "ToolUncertainData": LEDGER, "FinalData": LEDGER}


@functools.cache  # parsed once for every count here (nothing mutates the trees)
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


def _used_names(tree: ast.Module) -> set[str]:
    """Names a module uses as values (not only imports or re-exports)."""
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _strings(tree: ast.Module) -> list[str]:
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


REDACTOR = "protocol/redact.py"
CLEANER = "protocol/text.py"


def test_one_redactor_with_one_rule_set() -> None:
    """One class redacts (protocol/redact.py, the shared leaf): kernel, workers and jev_harness
    import it. The rule set (the token formats, the marker, the shortest secret) is used
    nowhere else, and no module replaces secrets on its own (`str.replace(secret, ...)`)."""
    sources = _sources()
    classes = sorted(
        path
        for path, tree in sources.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "Redactor"
    )
    assert classes == [REDACTOR]
    rules = {"TOKEN_PATTERNS", "REDACTED", "MIN_SECRET_CHARS"}
    users = sorted(p for p, tree in sources.items() if _used_names(tree) & rules)
    assert users == [REDACTOR, "protocol/secrets.py"], users  # the rules, and where they are
    markers = sorted(
        p
        for p, tree in sources.items()
        if any("[redacted]" in s.lower() for s in _strings(tree) if len(s) < 40)
    )
    assert markers == ["protocol/secrets.py"], markers


def test_one_cleaning_of_lone_surrogates() -> None:
    """`protocol.text.clean` is the one rule: no other module writes U+FFFD for a surrogate or
    escapes one with `encode(..., "backslashreplace")` (decoding bytes that way is no cleaning:
    it is what `clean` writes for surrogateescape's bytes)."""
    sources = _sources()
    defined = sorted(
        p
        for p, tree in sources.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "clean"
    )
    assert defined == [CLEANER], defined
    replacing = sorted(p for p, tree in sources.items() if "\ufffd" in "".join(_strings(tree)))
    assert replacing == [CLEANER], replacing
    escaping = sorted(
        p
        for p, tree in sources.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", None) == "encode"
        and "backslashreplace" in [a.value for a in node.args if isinstance(a, ast.Constant)]
    )
    assert escaping == [], escaping


def test_one_writer_of_the_result_line() -> None:
    """The `result` and `sessions` lines are a protocol struct (protocol/results.py `Line`) that
    one writer builds (kernel/display.py `json_line`: redacted, the id checked, terminal-safe);
    no printer spells the envelope by hand (a dict with `kind` and `seq`)."""
    sources = _sources()
    found = constructors(sources, {"Line"})
    assert {name: sorted(paths) for name, paths in found.items()} == {"Line": ["kernel/display.py"]}
    by_hand = sorted(
        path
        for path, tree in sources.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        and {"kind", "seq"} <= {k.value for k in node.keys if isinstance(k, ast.Constant)}
    )
    assert by_hand == [], by_hand
