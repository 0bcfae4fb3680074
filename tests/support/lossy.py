"""The power-cut simulator for tests: a lossy disk that is always taken down afterwards, and
the mark that skips a test, saying why, where FUSE cannot run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.chaos.powercut.control import LossyDisk, available

REASON = available()
fuse = pytest.mark.skipif(REASON is not None, reason=f"power cuts need FUSE: {REASON}")


@contextlib.contextmanager
def lossy_disk(base: Path, model: str = "strict") -> Iterator[LossyDisk]:
    """A disk mounted at base/mnt under `model`, its durable image kept in base/backing."""
    disk = LossyDisk(base / "backing", base / "mnt", model, base / "state")
    disk.start()
    try:
        yield disk
    finally:
        disk.kill()
