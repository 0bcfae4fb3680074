"""The matrix: every row (a test taking `cell`) runs on every spawn path x front end whose
surfaces meet the row's needs (`@needs(...)`, frontends.py); rows listed in pending.py are
xfail(strict) on the cells named there. See README.md."""

from __future__ import annotations

import pytest

from tests.security import scenarios, world
from tests.security.groups import group_of_scenario
from tests.security.pending import pending_for
from tests.security.scenarios import Cell, Run, cells


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "matrix(needs): a matrix row needing front-end surfaces")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("matrix")
    wanted: frozenset[str] = marker.kwargs.get("needs", frozenset()) if marker else frozenset()
    params = []
    for cell in cells():
        if not wanted <= cell.fe.surfaces:
            continue
        marks = []
        entry = pending_for(metafunc.function.__name__, cell.path, cell.front_end)
        if entry is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=entry.reason))
        params.append(pytest.param(cell, id=cell.id, marks=marks))
    if not params:  # else pytest would skip it quietly ("got empty parameter set")
        raise pytest.UsageError(
            f"{metafunc.function.__name__} needs {sorted(wanted)}: no front end has all of them"
        )
    metafunc.parametrize("cell", params)


_WANTED: dict[str, list[tuple[str, Cell]]] = {}  # under pytest-xdist: group -> its runs


def pytest_collection_finish(session: pytest.Session) -> None:
    """The runs the selected rows need start now, in the background (scenarios.prefetch), with
    the environment as it is before any test changes it. Under pytest-xdist every worker
    collects every row but each scenario's rows run on one worker (tests/conftest.py's
    scheduler, groups.py): that one starts the group's runs at its first row of it."""
    if session.config.option.collectonly:
        return
    wanted = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        cell = callspec.params.get("cell") if callspec else None
        if isinstance(cell, Cell):
            wanted += [(name, cell) for name in scenarios.SCENARIOS if name in item.fixturenames]
    if wanted:
        world.snapshot_environment()
        if hasattr(session.config, "workerinput"):
            for key in wanted:
                _WANTED.setdefault(group_of_scenario(key[0]), []).append(key)
        else:
            scenarios.prefetch(wanted)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name in scenarios.SCENARIOS:
        if name in item.fixturenames and (wanted := _WANTED.pop(group_of_scenario(name), None)):
            scenarios.prefetch(wanted)


def pytest_sessionfinish(session: pytest.Session) -> None:
    scenarios.close_all()


@pytest.fixture
def probe(cell: Cell) -> Run:
    """The shared confined probe run of this cell (scenarios.py)."""
    return scenarios.probe(cell)


@pytest.fixture
def keyfile(cell: Cell) -> Run:
    """The shared key-file run of this cell (scenarios.py): the keys in the file alone."""
    return scenarios.keyfile(cell)


@pytest.fixture
def unseen(cell: Cell) -> Run:
    """The shared Landlocked run of this cell (scenarios.py)."""
    return scenarios.unseen(cell)


@pytest.fixture
def crash(cell: Cell) -> Run:
    """The shared worker-kill run of this cell (scenarios.py)."""
    return scenarios.crash(cell)


@pytest.fixture
def kernel_kill(cell: Cell) -> Run:
    """The shared kernel-kill run of this cell (scenarios.py)."""
    return scenarios.kernel_kill(cell)


@pytest.fixture
def powercut(cell: Cell) -> Run:
    """The shared power-cut run of this cell (scenarios.py)."""
    return scenarios.powercut(cell)
