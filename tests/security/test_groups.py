"""How the matrix is shared out between `make test`'s workers (groups.py) and how its runs are
prefetched there (scenarios.prefetch): each run made once, by one worker, in the background."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.security import groups, scenarios
from tests.security.scenarios import Cell, cells


def _row_ids() -> dict[str, list[str]]:
    """Scenario -> the node ids of its rows, on every cell (as pytest-xdist names them)."""
    found: dict[str, list[str]] = {}
    for (file_name, function), taken in groups._rows().items():
        for name in taken:
            found.setdefault(name, []).extend(
                f"tests/security/{file_name}::{function}[{cell.id}]" for cell in cells()
            )
    return found


def test_every_scenario_is_one_unit_and_the_matrix_is_several() -> None:
    """Before: the whole matrix was one unit, so one worker made all 48 runs while the other
    ran the rest of the suite. Now each scenario's rows (test_modes.py takes two scenarios,
    one per row) are one unit, and no two scenarios share one."""
    rows = _row_ids()
    assert set(rows) == set(scenarios.SCENARIOS)
    units = {name: {groups.scope(nodeid) for nodeid in ids} for name, ids in rows.items()}
    assert all(len(found) == 1 for found in units.values()), units
    assert len({next(iter(found)) for found in units.values()}) == len(scenarios.SCENARIOS)
    umask_0 = "test_modes.py::test_the_sessions_dir_is_the_owners_alone_under_umask_0"
    assert groups.scope(f"tests/security/{umask_0}[cold-cli]") == "tests/security:crash"
    assert groups.scope("tests/security/test_view.py::test_x[warm-cli]") == (
        "tests/security/test_view.py"  # a test with runs of its own: its file's unit
    )


def test_rows_taking_two_scenarios_join_them_into_one_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = {("test_a.py", "test_one"): frozenset({"crash"})}
    rows |= {("test_b.py", "test_both"): frozenset({"crash", "powercut"})}
    monkeypatch.setattr(groups, "_rows", lambda: rows)
    monkeypatch.setattr(groups, "_groups", groups._groups.__wrapped__)
    assert groups.group_of_scenario("powercut") == groups.group_of_scenario("crash")
    assert groups.group_of_row("test_a.py", "test_one") == "crash+powercut"
    assert groups.group_of_scenario("probe") == "probe"


@pytest.fixture
def lane(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """scenarios' lane with two fake scenarios that record the thread that ran them."""
    ran: dict[str, list[str]] = {}

    def fake(name: str):  # type: ignore[no-untyped-def]
        def run(cell: Cell) -> str:
            ran.setdefault(f"{name} {cell.id}", []).append(threading.current_thread().name)
            return "done"

        return run

    monkeypatch.setattr(scenarios, "SCENARIOS", {"a": fake("a"), "b": fake("b")})
    monkeypatch.setattr(scenarios, "_SLOTS", {})
    monkeypatch.setattr(scenarios, "_LANE", {})
    monkeypatch.setattr(scenarios, "CONFINED", set())
    monkeypatch.delenv("MATRIX_PREFETCH", raising=False)
    try:
        yield ran
    finally:
        scenarios.close_all()


def _wait(key: tuple[str, Cell]) -> None:
    """Until the lane has run `key` (a bound on a hang, not a speed test)."""
    deadline = time.monotonic() + 60
    while (slot := scenarios._SLOTS.get(key)) is None or not slot.done.is_set():
        assert time.monotonic() < deadline, f"the lane never ran {key}"
        time.sleep(0.01)


def test_a_second_batch_is_prefetched_too_once_each(lane: dict[str, list[str]]) -> None:
    """Under pytest-xdist a worker prefetches each scenario group at its first row of it, so
    prefetch is called again after (or while) the lane runs the first batch. Before, a second
    call did nothing: the group's rows then made their runs one by one, in the foreground."""
    cold, warm = Cell("cold", "cli"), Cell("warm", "harness")
    scenarios.prefetch([("a", cold), ("a", warm)])
    scenarios.prefetch([("b", cold)])  # while the first batch runs, or after it
    for key in [("a", cold), ("a", warm), ("b", cold)]:
        _wait(key)
    scenarios._LANE["thread"].join(30)
    scenarios.prefetch([("b", warm), ("a", cold)])  # after the lane left: a new one starts
    _wait(("b", warm))
    assert lane == {
        "a cold-cli": ["matrix-prefetch"],
        "a warm-harness": ["matrix-prefetch"],
        "b cold-cli": ["matrix-prefetch"],
        "b warm-harness": ["matrix-prefetch"],
    }
