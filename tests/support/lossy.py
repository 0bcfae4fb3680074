"""The power-cut simulator for tests: a lossy disk that is always taken down afterwards, and
the mark that skips a test, saying why, where FUSE cannot run."""

from __future__ import annotations

import contextlib
import os
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


def fsync(path: Path) -> None:
    """fsync a file or a directory (its entries)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
