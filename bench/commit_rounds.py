"""When the group commit runs its rounds (issue 21, the step's cost): bench/agent.py's jmp step
with every record synced at once (`GATHER_S` 0: the first commit thread's behaviour) against
the default (a tool's result at once, the rest with the next durable record, at most
`GATHER_S` later), in one process, rounds alternating, so both see the same load.

`python -m bench commit_rounds` (about 20 s idle). Per side: the median step (between two
announced `tool_finished`), the log fsyncs a step, and the median of each phase by the time
the kernel appended its records.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

N = 20  # steps per round
ROUNDS = 4  # measured rounds per side, alternating


def measure(n: int = N, rounds: int = ROUNDS) -> dict[str, Any]:
    from bench.agent import JmpSide, jmp_phases
    from kernel.store import commit, event_log

    default = commit.GATHER_S
    sides = {"at once": 0.0, "gathered": default}
    out: dict[str, Any] = {name: {"steps": [], "fsyncs": 0, "phases": {}} for name in sides}
    current = ["at once"]
    real_sync = event_log.EventLog.sync

    def counted(log: event_log.EventLog) -> None:
        out[current[0]]["fsyncs"] += 1
        real_sync(log)

    base = Path(tempfile.mkdtemp(prefix="jbr", dir="/tmp"))
    event_log.EventLog.sync = counted  # type: ignore[method-assign]
    side = JmpSide(base)
    try:
        side.round(3)  # warm-up: worker start-up, imports, first connections
        for name in out:
            out[name]["fsyncs"] = 0
        for r in range(rounds):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                current[0] = name
                commit.GATHER_S = sides[name]
                events = side.round(n)
                out[name]["steps"] += side.steps(events)
                for label, values in jmp_phases(events).items():
                    out[name]["phases"].setdefault(label, []).extend(values)
    finally:
        commit.GATHER_S = default
        event_log.EventLog.sync = real_sync  # type: ignore[method-assign]
        side.close()
        shutil.rmtree(base, ignore_errors=True)
    return out


def table(data: dict[str, Any]) -> str:
    med = statistics.median
    eager, gathered = data["at once"], data["gathered"]
    rows = [
        "| jmp step | every record at once | gathered (default) | difference |",
        "|---|---|---|---|",
        f"| median ms | {med(eager['steps']):.2f} | {med(gathered['steps']):.2f} "
        f"| {med(gathered['steps']) - med(eager['steps']):+.2f} |",
        f"| log fsyncs a step | {eager['fsyncs'] / len(eager['steps']):.1f} "
        f"| {gathered['fsyncs'] / len(gathered['steps']):.1f} | |",
    ]
    for label, values in gathered["phases"].items():
        old = eager["phases"].get(label)
        if values and old:
            rows.append(
                f"| {label} | {med(old):.2f} | {med(values):.2f} | {med(values) - med(old):+.2f} |"
            )
    return "\n".join(rows)


def run() -> str:
    return table(measure())


if __name__ == "__main__":
    print(run())
