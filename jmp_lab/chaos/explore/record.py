"""One workload, run once on a traced power-cut disk: its trace and what jmp printed when.

The disk is mounted at ROOT (the directory every state is laid at later, so the absolute paths
in the session's records hold): `ROOT/sessions` is jmp's sessions directory, `ROOT/ws` the
workspace with the witness files. The run is the chaos runner's driver (jmp_lab/chaos/drive.py)
with the workload's plan: the task, the follow-up, the acknowledgement it plans. Every stdout
line is kept with the moment it was read, so a state knows what had been printed before its
crash.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jmp_lab.chaos.drive import Driver
from jmp_lab.chaos.explore.broken import hook
from jmp_lab.chaos.explore.workloads import SEED_FILES, Workload
from jmp_lab.chaos.powercut.control import LossyDisk
from jmp_lab.chaos.powercut.trace import read_trace
from jmp_lab.chaos.world import World


@dataclass
class Recording:
    workload: Workload
    root: Path
    trace: list[dict[str, Any]]
    printed: list[tuple[float, dict[str, Any]]]  # (moment read, record) of lines with a seq
    session: str | None  # the workload's session (its session record was printed)
    final: dict[str, bytes] = field(default_factory=dict)  # every file at the end, by path
    problems: list[str] = field(default_factory=list)  # what the run itself violated
    seconds: float = 0.0


def record(
    workload: Workload, base: Path, command: list[str], warm: Path, broken: str | None = None
) -> Recording:
    """Run `workload` once on a traced disk under `base` (ROOT is `base/root`)."""
    root, backing, state = base / "root", base / "backing", base / "disk-state"
    trace = base / "trace.jsonl"
    for path in (root, backing, state):
        shutil.rmtree(path, ignore_errors=True)
    trace.unlink(missing_ok=True)
    disk = LossyDisk(backing, root, "strict", state, trace=trace)
    disk.start()
    world: World | None = None
    try:
        world = World(workload.plan, root, warm)
        for name, text in SEED_FILES.items():
            (world.workspace / name).write_text(text)
        if broken is not None:
            world.extra = hook(broken, base / "broken")
        driver = Driver(workload.plan, base, command, warm, restart_pool=False, world=world)
        if workload.compact:

            def compact(request: int) -> None:
                assert world is not None and world.session_id is not None
                driver.invoke("--session", world.session_id, "--compact")

            driver.before_request = compact
        driver.drive()
        driver.verify()
    finally:
        if world is not None:
            world.close(keep=True)
        disk.stop()
    printed = [
        (moment, line)
        for out in driver.report.outcomes
        for moment, line in zip(out.times, out.lines, strict=True)
        if isinstance(line.get("seq"), int) and isinstance(line.get("session_id"), str)
    ]
    final = {
        "/" + str(p.relative_to(backing)): p.read_bytes()
        for p in backing.rglob("*")
        if p.is_file() and not p.is_symlink()
    }
    return Recording(
        workload,
        root,
        list(read_trace(trace)),
        printed,
        world.session_id if world is not None else None,
        final,
        driver.report.violations,
        sum(o.seconds for o in driver.report.outcomes),
    )
