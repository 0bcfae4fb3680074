"""Which rows of the matrix share runs: the scheduling unit of `make test`'s workers.

Rows share one run per (scenario, cell) (scenarios.py), so every row of a scenario must run in
one process, or two would each make that scenario's runs. But the four scenarios share
nothing: under pytest-xdist each is a unit of its own (tests/conftest.py's scheduler), so that
the matrix (a quarter of the suite's time, its cold agent runs importing OpenHands) is shared
out between the workers instead of being one worker's critical path.

Read from the test files' source (the controller of pytest-xdist collects nothing): a row is a
test function with a scenario's name among its parameters; rows naming several scenarios join
those scenarios into one group. A test taking none (test_coverage.py, test_view.py with runs
of its own) is its file's unit, as any other file is.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The scenarios of scenarios.py (it checks that its SCENARIOS are these, in this order).
SCENARIO_NAMES = ("probe", "keyfile", "crash", "kernel_kill", "powercut", "unseen")


@functools.cache
def _rows() -> dict[tuple[str, str], frozenset[str]]:
    """(file name, test function) -> the scenarios it takes, for every row here."""
    rows = {}
    for path in sorted(HERE.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                taken = frozenset(a.arg for a in node.args.args) & set(SCENARIO_NAMES)
                if taken:
                    rows[path.name, node.name] = taken
    return rows


@functools.cache
def _groups() -> dict[str, str]:
    """Scenario -> the name of its group: scenarios one row takes together are one group."""
    groups: list[set[str]] = [{name} for name in SCENARIO_NAMES]
    for taken in _rows().values():
        joined = [g for g in groups if g & taken]
        groups = [g for g in groups if not g & taken] + [set().union(*joined)]
    return {
        name: "+".join(n for n in SCENARIO_NAMES if n in group)
        for group in groups
        for name in group
    }


def group_of_row(file_name: str, function: str) -> str | None:
    """The group of the scenarios this test takes, None when it takes none."""
    taken = _rows().get((file_name, function))
    return _groups()[min(taken, key=SCENARIO_NAMES.index)] if taken else None


def group_of_scenario(name: str) -> str:
    return _groups()[name]


def scope(nodeid: str) -> str:
    """The scheduling unit of a test under tests/security/: `tests/security:GROUP` for a row,
    its file for any other test."""
    path, _, rest = nodeid.partition("::")
    function = rest.split("::")[-1].split("[", 1)[0]
    group = group_of_row(Path(path).name, function)
    return f"tests/security:{group}" if group else path
