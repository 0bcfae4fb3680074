"""A worker's working directory, and a sys.path that never gains it.

A worker starts in SPAWN_CWD with `python -P` (host/spawn.py), so the interpreter puts
nothing of the launch directory on sys.path; `enter_workdir` then moves it into the kernel's
cwd. One vendor would undo that: litellm (which OpenHands imports in the tool worker) runs
`sys.path.append(os.getcwd())` at import, which made the workspace importable for every
optional module a vendor tries and lacks (`opentelemetry`, `_winapi`, ...; found by
tests/test_launch_dir.py on the cold path). `guard_sys_path` makes sys.path drop, on the way
in, an entry that names the working directory (or is relative, which means the same).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from typing import Any, SupportsIndex

from host.spawn import WORKDIR_ENV


def _kept(entry: object) -> bool:
    if not isinstance(entry, str):
        return True  # not a path sys.path's finders would use as one
    if not os.path.isabs(entry):
        return False
    try:
        return os.path.normpath(entry) != os.getcwd()
    except OSError:  # the cwd is gone: nothing can be imported from it
        return True


class PathWithoutWorkdir(list):  # type: ignore[type-arg]
    """sys.path whose append/insert/extend/+=/slice assignment drop the working directory."""

    def append(self, entry: Any) -> None:
        if _kept(entry):
            super().append(entry)

    def insert(self, index: SupportsIndex, entry: Any) -> None:
        if _kept(entry):
            super().insert(index, entry)

    def extend(self, entries: Iterable[Any]) -> None:
        super().extend(e for e in entries if _kept(e))

    def __iadd__(self, entries: Iterable[Any]) -> PathWithoutWorkdir:  # type: ignore[misc]
        self.extend(entries)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            super().__setitem__(index, [e for e in value if _kept(e)])
        elif _kept(value):
            super().__setitem__(index, value)


def guard_sys_path() -> None:
    """Replace sys.path by a PathWithoutWorkdir holding its current entries (idempotent)."""
    if not isinstance(sys.path, PathWithoutWorkdir):
        sys.path = PathWithoutWorkdir(sys.path)


def enter_workdir() -> None:
    """Guard sys.path, chdir to WORKDIR_ENV and drop that variable (no shell inherits it); a
    directory gone meanwhile leaves the worker in SPAWN_CWD."""
    guard_sys_path()
    workdir = os.environ.pop(WORKDIR_ENV, None)
    if workdir:
        with contextlib.suppress(OSError):
            os.chdir(workdir)
