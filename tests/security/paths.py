"""The spawn paths a worker can start by: the matrix runs every row on each of them.

A path gives the front end's environment and says which process must be a worker's parent
when the path is really taken (rows check it: a warm run that silently spawned cold would
prove nothing about the warm path). To add a path: subclass `SpawnPath`, add it to `PATHS`,
and name the product class that implements it in `IMPLEMENTS` (test_coverage.py fails while a
`Proc` implementation in kernel/supervision/spawn.py or pool_client.py has no path here).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import psutil

from host import pool as H
from tests.security.world import base_environment
from tests.support.warm import launch_pool, pool_pids, suite_pool, view_key_of


class SpawnPath:
    name = ""

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def prepare(self, wrap: Sequence[str] = ()) -> None:
        """Before a run whose front end runs under `wrap` (its confinement): make the path
        available (e.g. the pool of that confinement answers)."""

    def warm_up(self, wrap: Sequence[str] = ()) -> None:
        """Start making the path available for runs under `wrap`, and return at once."""

    def parent_kind(self, parent: psutil.Process | None, kernel_pid: int) -> str:
        """What a worker's parent was: "pool", "kernel" or "other"."""
        if parent is None:
            return "other"
        if parent.pid == kernel_pid:
            return "kernel"
        try:
            cmd = parent.cmdline()
        except psutil.Error:
            return "other"
        return "pool" if cmd[:1] == [H.TITLE] else "other"

    expected_parent = ""


class Warm(SpawnPath):
    """Forked by a warm pool: the suite's own (tests/conftest.py), private to this test run,
    every kind preloaded, started by the unconfined test process, as a user's first unconfined
    run starts it; for a confined run, the suite's pool of that confinement, started under
    it, as such a run starts it (a pool serves only kernels confined as it is)."""

    name = "warm"
    expected_parent = "pool"

    def directory(self) -> Path:
        return Path(base_environment()["JMP_WARM_DIR"])

    def env(self) -> dict[str, str]:
        return {"JMP_WARM": "1", "JMP_WARM_DIR": str(self.directory())}

    def prepare(self, wrap: Sequence[str] = ()) -> None:
        suite_pool(self.directory(), ready_s=300, wrap=wrap)

    def warm_up(self, wrap: Sequence[str] = ()) -> None:
        """Launch that confinement's pool now (its preload overlaps the cold runs)."""
        view = view_key_of(wrap) if wrap else None
        if not pool_pids(self.directory(), view):
            launch_pool(self.directory(), wrap)


class Cold(SpawnPath):
    """`JMP_WARM=0`: every worker a direct child of its kernel."""

    name = "cold"
    expected_parent = "kernel"

    def env(self) -> dict[str, str]:
        return {"JMP_WARM": "0", "JMP_WARM_DIR": base_environment()["JMP_WARM_DIR"]}


PATHS: dict[str, SpawnPath] = {p.name: p for p in (Warm(), Cold())}

# The product's process handles (kernel/supervision) and the path that covers each.
IMPLEMENTS = {"ColdProc": "cold", "WarmProc": "warm"}
