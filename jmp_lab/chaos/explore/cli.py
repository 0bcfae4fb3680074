"""`jmp-chaos crash-states` (`python -m jmp_lab.chaos crash-states`): every crash state of a
named set of workloads, under each directory model, checked; and the broken builds caught.

    jmp-chaos crash-states --workloads cli --minutes 30
    jmp-chaos crash-states --workloads bash --models strict --broken all
    jmp-chaos crash-states --replay crash-states/bash-strict-printed-lost

For each workload: one run on a traced power-cut disk (record.py), then for each model every
distinct crash state of its trace (states.py), each checked on the disk (verify.on_state), and
as many as the time allows recovered through the CLI (verify.recover; a state recovered under
one model is not recovered again under another: the same content is the same state). The table
gives crash points, states explored and distinct, recovered, violations and states a minute,
per workload and model. `--broken NAME|all` also runs each broken build (broken.py) on the
workloads in order until one of its states is violated: the smallest workload, the earliest
crash point and the fewest kept changes make its reproducer. Each violation's reproducer is a
directory (the state, the recording, the command that checks it again: `--replay DIR`).
Exit 1 when the real build violated anything or a broken build went uncaught; 2 when FUSE
cannot run here.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from jmp_lab.chaos.explore.broken import BROKEN
from jmp_lab.chaos.explore.record import Recording, record
from jmp_lab.chaos.explore.states import Explored, State, enumerate_states
from jmp_lab.chaos.explore.verify import on_state, recover
from jmp_lab.chaos.explore.workloads import Workload, named, workload
from jmp_lab.chaos.invoke import jmp_command
from jmp_lab.chaos.powercut.backing import scan
from jmp_lab.chaos.powercut.control import available
from jmp_lab.chaos.powercut.cut import Entry
from jmp_lab.chaos.powercut.model import MODELS
from jmp_lab.chaos.targets import start_pool, stop_pool

GOLDEN = 0.6180339887
LOG = "/events.jsonl"


@dataclass
class Row:
    workload: str
    model: str
    build: str = "jmp"
    explored: Explored = field(default_factory=Explored)
    recovered: int = 0
    classes: int = 0  # distinct states as recovery sees them (State.recovery_key)
    violations: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0  # enumeration and checks on the states
    recover_seconds: float = 0.0
    found: dict[str, tuple[State, str]] = field(default_factory=dict)  # class -> smallest


@dataclass
class Explorer:
    base: Path
    command: list[str]
    warm: Path
    models: tuple[str, ...] = MODELS
    deadline: float = float("inf")
    recover: bool = True
    recover_limit: int | None = None  # per workload
    out: Path | None = None
    rows: list[Row] = field(default_factory=list)
    records: float = 0.0

    def workload(
        self, load: Workload, broken: str | None = None, until: float | None = None
    ) -> list[Row]:
        """Record `load` (on build `broken`, or the real one), explore its states under each
        model; recover states until `until` (else the explorer's deadline), shared evenly
        among the models."""
        until = self.deadline if until is None else until
        started = time.monotonic()
        rec = record(load, self.base, self.command, self.warm, broken)
        self.records += time.monotonic() - started
        if self.out is not None:  # every trace is kept: the explorer can be run on it again
            traces = self.out / "traces"
            traces.mkdir(parents=True, exist_ok=True)
            name = f"{broken or 'jmp'}-{load.name}".replace("|", "_")
            with open(traces / f"{name}.jsonl", "w") as out:
                out.writelines(json.dumps(event) + "\n" for event in rec.trace)
        rows = []
        recovered: dict[str, list[str]] = {}
        for number, model in enumerate(self.models):
            row = Row(load.name, model, broken or "jmp")
            if rec.problems and broken is None:
                row.violations["recorded-run"] += len(rec.problems)
                self._keep(row, None, "recorded-run: " + rec.problems[0], rec)
            began = time.monotonic()
            states = list(enumerate_states(rec.trace, model, row.explored))
            for state in states:
                for problem in on_state(state, rec):
                    self._count(row, state, problem, rec)
            row.seconds = time.monotonic() - began
            row.classes = len({state.recovery_key() for state in states})
            if self.recover and (broken is None or not row.violations):
                began = time.monotonic()
                share = (until - began) / (len(self.models) - number)
                for state in _spread(states):
                    if time.monotonic() > began + share:
                        break
                    if self.recover_limit is not None and len(recovered) >= self.recover_limit:
                        break
                    key = state.recovery_key()
                    if key in recovered:  # the same under another model, or but for temp files
                        for problem in recovered[key]:
                            self._count(row, state, problem, rec)
                        continue
                    problems, _ = recover(state, rec, self.base, self.command, self.warm)
                    recovered[key] = problems
                    row.recovered += 1
                    for problem in problems:
                        self._count(row, state, problem, rec)
                row.recover_seconds = time.monotonic() - began
            rows.append(row)
            self.rows.append(row)
        return rows

    def _count(self, row: Row, state: State | None, problem: str, rec: Recording) -> None:
        cls = problem.split(":", 1)[0]
        row.violations[cls] += 1
        old = row.found.get(cls)
        if state is not None and (old is None or state.choice.size() < old[0].choice.size()):
            row.found[cls] = (state, problem)
            self._keep(row, state, problem, rec)

    def _keep(self, row: Row, state: State | None, problem: str, rec: Recording) -> None:
        if self.out is None:
            return
        cls = problem.split(":", 1)[0]
        where = self.out / f"{row.build}-{row.workload}-{row.model}-{cls}".replace("|", "_")
        shutil.rmtree(where, ignore_errors=True)
        (where / "state").mkdir(parents=True)
        for entry in state.entries if state else []:
            path = where / "state" / entry.path.lstrip("/")
            if entry.kind == "dir":
                path.mkdir(parents=True, exist_ok=True)
            elif entry.kind == "file":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(entry.data)
        saved = {
            "build": row.build,
            "workload": rec.workload.name,
            "model": row.model,
            "violation": problem,
            "choice": state.choice.describe() if state else {},
            "time": state.choice.time if state and state.choice.time != float("inf") else None,
            "root": str(rec.root),
            "session": rec.session,
            "printed": rec.printed,
            "final": {p: base64.b64encode(d).decode() for p, d in rec.final.items()},
        }
        (where / "recording.json").write_text(json.dumps(saved, indent=1))
        with open(where / "trace.jsonl", "w") as trace:
            trace.writelines(json.dumps(event) + "\n" for event in rec.trace)
        (where / "README").write_text(
            f"{problem}\n\nworkload {rec.workload.name}, model {row.model}, build {row.build}\n"
            f"{json.dumps(saved['choice'], indent=1)}\n\n"
            f"check this state again (laid at {rec.root}):\n"
            f"  python -m jmp_lab.chaos crash-states --replay {where}\n"
        )


def _spread(states: list[State]) -> list[State]:
    """The order of recoveries: first one state for each distinct content of the logs (what
    a recovery reads first), then the rest; each part in an order that covers the whole trace
    early (a time budget that runs out has recovered states from every part of it)."""
    spread = [s for _, s in sorted(enumerate(states), key=lambda p: (p[0] * GOLDEN) % 1.0)]
    first: list[State] = []
    rest: list[State] = []
    logs: set[tuple[tuple[str, bytes], ...]] = set()
    for state in spread:
        log = tuple(sorted((p, d) for p, d in state.files().items() if p.endswith(LOG)))
        (rest if log in logs else first).append(state)
        logs.add(log)
    return first + rest


def table(rows: list[Row], wall: float) -> str:
    head = (
        "build",
        "workload",
        "model",
        "points",
        "explored",
        "distinct",
        "classes",
        "recovered",
        "violations",
        "states/min",
        "recovered/min",
    )
    body = []
    for row in rows:
        explored = row.explored
        per = explored.states / row.seconds * 60 if row.seconds else 0.0
        rper = row.recovered / row.recover_seconds * 60 if row.recover_seconds else 0.0
        said = ", ".join(f"{k} {v}" for k, v in sorted(row.violations.items())) or "0"
        body.append(
            (
                row.build,
                row.workload,
                row.model,
                str(explored.points),
                str(explored.states),
                str(explored.distinct),
                str(row.classes),
                str(row.recovered),
                said,
                f"{per:.0f}",
                f"{rper:.1f}",
            )
        )
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *body]]
    total = sum(r.explored.states for r in rows)
    distinct = sum(r.explored.distinct for r in rows)
    lines.append(
        f"total: {total} states explored, {distinct} distinct, "
        f"{sum(r.recovered for r in rows)} recovered, in {wall:.0f} s"
    )
    return "\n".join(lines)


def replay(where: Path, command: list[str], base: Path, warm: Path) -> list[str]:
    """Check a reproducer's state again: on the state, then recovered through the CLI."""
    saved = json.loads((where / "recording.json").read_text())
    name = saved["workload"]
    load = workload(name.removesuffix("@cold"), warm=not name.endswith("@cold"))
    from jmp_lab.chaos.explore.states import Choice

    moment = saved["time"] if saved["time"] is not None else float("inf")
    state = State(Choice(0, "replay", moment), _entries(where / "state"), "replay")
    rec = Recording(
        load,
        Path(saved["root"]),
        [],
        [(t, line) for t, line in saved["printed"]],
        saved["session"],
        {p: base64.b64decode(d) for p, d in saved["final"].items()},
    )
    found = on_state(state, rec)
    problems, _ = recover(state, rec, base, command, warm)
    return found + problems


def _entries(tree: Path) -> list[Entry]:
    from jmp_lab.chaos.powercut.model import Image

    image = Image()
    scan(tree, image)
    entries = []
    for top in sorted(tree.rglob("*")):
        rel = "/" + str(top.relative_to(tree))
        if top.is_dir():
            entries.append(Entry(rel, "dir", 0o700))
        elif top.is_file():
            entries.append(Entry(rel, "file", 0o600, top.read_bytes(), node=hash(rel)))
    return entries


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="jmp-chaos crash-states",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workloads", nargs="+", default=["cli"], help="names or set names")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--broken", nargs="*", default=[], help=f"{', '.join(BROKEN)} or all")
    parser.add_argument(
        "--minutes", type=float, default=None, help="recover no state after (shared evenly)"
    )
    parser.add_argument("--no-recover", action="store_true", help="checks on the states only")
    parser.add_argument("--recover-limit", type=int, default=None, help="states per workload")
    parser.add_argument("--jmp", default=None, help="command line of the jmp under test")
    parser.add_argument("--dir", type=Path, default=None, help="where it runs")
    parser.add_argument("--out", type=Path, default=Path("crash-states"), help="reproducers")
    parser.add_argument("--replay", type=Path, default=None, help="check a reproducer again")
    options = parser.parse_args(argv)
    reason = available()
    if reason is not None and options.replay is None:
        print(f"jmp-chaos crash-states: power cuts cannot run here: {reason}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="crash-", dir=options.dir))
    warm = base / "warm"
    command = jmp_command(options.jmp)
    start_pool(warm)
    started = time.monotonic()
    try:
        if options.replay is not None:
            problems = replay(options.replay, command, base, warm)
            print("\n".join(problems) or "no violation")
            return 1 if problems else 0
        models = tuple(m for m in options.models.split(",") if m)
        deadline = started + options.minutes * 60 if options.minutes else float("inf")
        explorer = Explorer(
            base,
            command,
            warm,
            models,
            deadline,
            not options.no_recover,
            options.recover_limit,
            options.out,
        )
        loads = named(options.workloads)
        for number, load in enumerate(loads):  # the recoveries' time shared evenly
            now = time.monotonic()
            explorer.workload(load, until=now + (deadline - now) / (len(loads) - number))
        uncaught = []
        builds = list(BROKEN) if options.broken == ["all"] else options.broken
        for name in builds:
            caught = False
            for load in loads:
                rows = explorer.workload(load, broken=name)
                if any(r.violations for r in rows):
                    caught = True
                    break
            if not caught:
                uncaught.append(name)
        print(table(explorer.rows, time.monotonic() - started))
        _print_found(explorer.rows, options.out)
        for name in uncaught:
            print(f"broken build {name}: NOT caught by any state of {options.workloads}")
        real = [r for r in explorer.rows if r.build == "jmp" and r.violations]
        return 1 if real or uncaught else 0
    finally:
        stop_pool(warm)
        shutil.rmtree(base, ignore_errors=True)


def _print_found(rows: list[Row], out: Path) -> None:
    for row in rows:
        for cls, (state, problem) in sorted(row.found.items()):
            where = out / f"{row.build}-{row.workload}-{row.model}-{cls}".replace("|", "_")
            kind = "caught" if row.build != "jmp" else "VIOLATION"
            print(f"{kind} [{row.build}] {row.workload} / {row.model}: {problem}")
            choice = state.choice
            print(
                f"  smallest state: crash before {choice.before} (trace event {choice.point}); "
                f"kept {_few(choice.kept) or 'no pending op'}; unsynced data kept: "
                f"{_few(choice.data) or 'none'}"
            )
            print(f"  reproducer: {where} (python -m jmp_lab.chaos crash-states --replay {where})")


def _few(items: tuple[str, ...], n: int = 3) -> str:
    more = f" and {len(items) - n} more" if len(items) > n else ""
    return "; ".join(items[:n]) + more
