"""Shared fixtures: short temp dirs (ipc:// paths are capped near 107 bytes) and worker env."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
