"""Shared fixtures: short temp dirs (ipc:// paths are capped near 107 bytes) and worker env."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
# The key file (kernel/config/keys.py) the suite's processes would read: none, never the user's
# (a test that needs one sets XDG_CONFIG_HOME to its own directory).
os.environ["XDG_CONFIG_HOME"] = os.path.join(tempfile.gettempdir(), f"jmp-suite-{os.getpid()}")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path, for sockets and sessions."""
    path = Path(tempfile.mkdtemp(prefix="jt", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture
def servers() -> Iterator[tuple[Any, Any]]:
    """A loopback Jev server and a loopback OpenAI-compatible server."""
    from jmp_lab.servers.flash import FlashServer
    from jmp_lab.servers.jev import JevServer

    with JevServer() as jev, FlashServer() as flash:
        yield jev, flash


@pytest.fixture
def jmp(short_tmp: Path, servers: tuple[Any, Any]) -> Any:
    """The real CLI against the loopback servers, in a fresh workspace and sessions dir."""
    from tests.support.cli import Cli

    return Cli(short_tmp, *servers)


@pytest.fixture
def embed_env(monkeypatch: pytest.MonkeyPatch, servers: tuple[Any, Any], short_tmp: Path) -> Path:
    """For an embedded kernel: model keys and the loopback servers in the environment, and a
    fresh workspace (returned). tests/support/embed.py builds the Agent."""
    from tests.support.embed import point_at

    return point_at(monkeypatch, servers, short_tmp)


def _distributing(config: pytest.Config) -> bool:
    """This process hands the tests to pytest-xdist workers (`make test`: `-n 2`) and runs
    none itself: each worker is a session of its own, with its own pool."""
    return getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `-n` (the default `--dist load`): a whole file to one worker, as `--dist loadfile`
    (its module fixtures are made once), and each scenario of the security matrix with all its
    rows to one worker (tests/security/groups.py): its rows share one run per cell
    (tests/security/scenarios.py), which two workers would each make; the scenarios share
    nothing, and one worker running all four was the suite's critical path."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadFileScheduling

    from tests.security.groups import scope

    class FilesAndTheMatrix(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return scope(nodeid) if path.startswith("tests/security/") else path

    return FilesAndTheMatrix(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `browser` (tests/support/browser.py: needs_chromium) skips where no real
    browser is installed, saying why, and fails instead under JMP_REQUIRE_BROWSER=1 (CI)."""
    if item.get_closest_marker("browser") is not None:
        from tests.support.browser import missing_browser, skip_without_browser

        if missing_browser() is not None:
            skip_without_browser()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The suite's private pool dir is made before collection; on a run of whole directories
    (`make test`) the pool is launched now, so its imports overlap collection instead of the
    first tests (which would spawn cold meanwhile). A run of single files launches it later,
    and only when a test talks to the loopback models. Under pytest-xdist each worker does
    this for itself; the process that distributes the tests makes no pool."""
    from tests.support.warm import launch_pool, make_pool_dir

    if _distributing(session.config):
        return
    os.environ.setdefault("JMP_WARM", "1")
    private = make_pool_dir("p")  # and removes the dirs of killed runs
    os.environ["JMP_WARM_DIR"] = str(private)
    _POOL["dir"] = private
    broad = any(Path(str(arg).split("::")[0]).is_dir() for arg in session.config.args)
    if _warm() and broad and not session.config.option.collectonly:
        launch_pool(private)
        _POOL["launched"] = True


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The private pool ends with the session even when no test ran (a collection error,
    --collect-only): the fixture below never started then."""
    from tests.support.warm import pool_pids

    private = _POOL.get("dir")
    if private is not None:
        for pid in pool_pids(private):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(private, ignore_errors=True)


_POOL: dict[str, Any] = {}  # the session's private pool: its dir, and whether it is launched


def _warm() -> bool:
    return os.environ["JMP_WARM"].strip() != "0"


@pytest.fixture(scope="session", autouse=True)
def warm_pool_of_this_session(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Worker tests run warm by default, from one pool of this session's own in a private dir
    (made at session start, launched there on a broad run), launched now otherwise when a test
    talks to the loopback models (its imports overlap the first tests, which spawn cold
    meanwhile; other kernels launch it on demand, as a user's first run does) and killed at the
    end with any pool a test started in the default dir.
    `JMP_WARM=0 pytest ...` runs them all cold; a test of the cold path sets JMP_WARM=0 itself."""
    from tests.support.warm import launch_pool, stop_pools_started

    private: Path = _POOL["dir"]
    with stop_pools_started(private):
        items = request.session.items
        wanted = any("servers" in i.fixturenames for i in items)
        if _warm() and wanted and not _POOL.get("launched"):
            launch_pool(private)
        yield private
    shutil.rmtree(private, ignore_errors=True)
