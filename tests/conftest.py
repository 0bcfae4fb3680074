"""Shared fixtures: short temp dirs (ipc:// paths are capped near 107 bytes) and worker env."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")


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
    from tests.servers.flash import FlashServer
    from tests.servers.jev import JevServer

    with JevServer() as jev, FlashServer() as flash:
        yield jev, flash


@pytest.fixture
def jmp(short_tmp: Path, servers: tuple[Any, Any]) -> Any:
    """The real CLI against the loopback servers, in a fresh workspace and sessions dir."""
    from tests.support.cli import Cli

    return Cli(short_tmp, *servers)


@pytest.fixture(scope="session", autouse=True)
def warm_pool_of_this_session(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Worker tests run warm by default, from one pool of this session's own in a private dir,
    launched now when a test talks to the loopback models (its imports overlap the first tests,
    which spawn cold meanwhile; other kernels launch it on demand, as a user's first run does)
    and killed at the end with any pool a test started in the default dir.
    `JMP_WARM=0 pytest ...` runs them all cold; a test of the cold path sets JMP_WARM=0 itself."""
    from tests.support.warm import launch_pool, make_pool_dir, stop_pools_started

    os.environ.setdefault("JMP_WARM", "1")
    private = make_pool_dir("p")  # and removes the dirs of killed runs
    os.environ["JMP_WARM_DIR"] = str(private)
    with stop_pools_started(private):
        items = request.session.items
        if os.environ["JMP_WARM"].strip() != "0" and any(
            "servers" in i.fixturenames for i in items
        ):
            launch_pool(private)
        yield private
    shutil.rmtree(private, ignore_errors=True)
