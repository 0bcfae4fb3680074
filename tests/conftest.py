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
def warm_pool_of_this_session() -> Iterator[None]:
    """Worker tests run cold (JMP_WARM=0) unless the run says `JMP_WARM=1 pytest ...`; any pool
    this session starts lives in its own private dir and is stopped at the end, and one that a
    test started in the default dir (an env without JMP_WARM_DIR) is stopped too."""
    from tests.support.warm import stop_pools_started

    os.environ.setdefault("JMP_WARM", "0")
    private = tempfile.mkdtemp(prefix="jwp", dir="/tmp")
    os.environ["JMP_WARM_DIR"] = private
    with stop_pools_started(Path(private)):
        yield
    shutil.rmtree(private, ignore_errors=True)
