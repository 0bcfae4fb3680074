"""`python -m jmp_lab.chaos --iterations N --seed S [--first I] [--jmp CMD] [--keep] [--power M]`

Runs N iterations (plans seed:first .. seed:first+N-1), prints the table of figures and, for
each violation, the kept directory and the command that reproduces it. Exit 1 on violations.
`--power mix` makes every odd iteration a power iteration (its sessions directory on a lossy
FUSE disk, power cuts among its kills), `--power only` every iteration; where FUSE cannot run
it says why and exits 2. `--model M` fixes the disk's model; `--aim SPEC` gives every power
iteration one cut at one point and nothing else (`phase=event,kind=user,nth=2,data=lose`:
plan.Cut's fields), a reproducer that does not depend on timing.

Two other campaigns share this entry: `crash-states ...` (every crash state of short CLI
sessions: jmp_lab/chaos/explore) and `rendered ...` (kills of the harness worker while a real
Chromium renders a page: jmp_lab/chaos/rendered.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from jmp_lab.chaos.drive import IterationReport, run_iteration
from jmp_lab.chaos.figures import table
from jmp_lab.chaos.invoke import jmp_command
from jmp_lab.chaos.plan import IterationPlan, aimed, make_plan, make_quick_plan, parse_cut
from jmp_lab.chaos.powercut.control import available
from jmp_lab.chaos.powercut.model import MODELS
from jmp_lab.chaos.targets import start_pool, stop_pool
from kernel.config.install import program

POWER_MODES = ("off", "mix", "only")


def is_power(mode: str, index: int) -> bool:
    """Whether iteration `index` is a power iteration under `--power mode`."""
    return mode == "only" or (mode == "mix" and index % 2 == 1)


def campaign(
    iterations: int,
    seed: int,
    first: int = 0,
    jmp: str | None = None,
    base: Path | None = None,
    keep: bool = False,
    log: bool = True,
    short: bool = False,
    minutes: float | None = None,
    warm: Path | None = None,
    power: str = "off",
    plans: list[IterationPlan] | None = None,
    model: str | None = None,
    aim: str | None = None,
    lane: tuple[int, int] = (0, 1),
    quick: bool = False,
    progress: Callable[[Counter[str], list[IterationReport], float], None] | None = None,
) -> tuple[Counter[str], list[IterationReport], float]:
    """Run the iterations in order; returns the summed figures, the reports and wall time.
    `warm`: a pool directory the caller owns (the suite's, already preloaded), else the
    campaign's own (`base/warm`, stopped at the end); a kill of the pool hits it either way.
    `power`: off, mix or only, `model` and `aim` (see the module docstring). `plans`: these
    instead of the seed's (a test aims its cuts). `lane` (j, k): only the iterations whose
    offset from `first` is j modulo k (one lane of a parallel campaign, see `lanes`).
    `quick`: the plans of `make_quick_plan` (aimed at kill points). `progress` is called
    after every iteration with the figures so far."""
    command = jmp_command(jmp)
    base = base or Path(tempfile.mkdtemp(prefix="jmp-chaos-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    totals: Counter[str] = Counter()
    reports = []
    started = time.monotonic()
    try:
        if warm is None and jmp is None:
            start_pool(base / "warm")
        # Plans are made as they are run: `make chaos` asks for 100,000 iterations and stops
        # at its time budget, and making them all first took a lane 1-2 minutes of CPU
        # (2 ms a plan on a loaded machine) before its first kill.
        todo: Iterable[IterationPlan] = plans or (
            make_quick_plan(seed, i, is_power(power, i))
            if quick
            else make_plan(seed, i, short=short, power=is_power(power, i))
            for i in lane_of(range(first, first + iterations), first, *lane)
        )
        if model or aim:
            todo = (_aim(plan, model, aim) if plan.power else plan for plan in todo)
        for plan in todo:
            if minutes is not None and time.monotonic() - started > minutes * 60:
                break  # the time budget is spent: no new iteration starts
            report = run_iteration(plan, base, command, keep, warm, restart_pool=jmp is None)
            reports.append(report)
            totals.update(report.figures)
            totals["iterations"] += 1
            totals["power iterations"] += bool(plan.power)
            totals["violations"] += len(report.violations)
            for violation in report.violations:
                totals[f"violations: {violation.split(':', 1)[0]}"] += 1
            if log:
                print(
                    f"iteration {plan.index}{' (power, ' + plan.power + ')' if plan.power else ''}"
                    f": {report.figures['kills']} kill(s), {report.figures['cuts']} cut(s), "
                    f"{len(report.violations)} violation(s), {report.seconds:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
            if progress is not None:
                progress(totals, reports, time.monotonic() - started)
    finally:
        if warm is None:
            stop_pool(base / "warm")
    return totals, reports, time.monotonic() - started


def lane_of(indices: range, first: int, lane: int, lanes: int) -> list[int]:
    """The iterations lane `lane` of `lanes` runs: those `lane` past `first` modulo `lanes`."""
    return [i for i in indices if (i - first) % lanes == lane]


def _aim(plan: IterationPlan, model: str | None, aim: str | None) -> IterationPlan:
    if aim:
        return aimed(plan, parse_cut(aim), model)
    return dataclasses.replace(plan, power=model)


def reproduce(
    seed: int,
    index: int,
    jmp: str | None,
    short: bool = False,
    power: bool = False,
    model: str | None = None,
    aim: str | None = None,
    quick: bool = False,
) -> str:
    extra = (" --short" if short else "") + (" --quick" if quick else "")
    extra += " --power only" if power else ""
    extra += f" --model {model}" if model and power else ""
    extra += f" --aim {shlex.quote(aim)}" if aim and power else ""
    extra += f" --jmp {shlex.quote(jmp)}" if jmp else ""
    return f"python -m jmp_lab.chaos --seed {seed} --first {index} --iterations 1 --keep{extra}"


def found_in(reports: list[IterationReport]) -> list[dict[str, object]]:
    """The iterations that violated something: index, violations, kept directory, power."""
    return [
        {
            "index": r.plan.index,
            "violations": r.violations,
            "root": str(r.root),
            "power": bool(r.plan.power),
        }
        for r in reports
        if r.violations
    ]


def print_found(found: list[dict[str, object]], options: argparse.Namespace) -> None:
    for entry in found:
        index = int(str(entry["index"]))
        for violation in entry["violations"]:  # type: ignore[attr-defined]
            print(f"VIOLATION iteration {index}: {violation}")
        print(f"  kept: {entry['root']}")
        again = reproduce(
            options.seed,
            index,
            options.jmp,
            options.short,
            bool(entry["power"]),
            options.model,
            options.aim,
            options.quick,
        )
        print(f"  reproduce: {again}")


def write_report(
    path: Path, totals: Counter[str], reports: list[IterationReport], wall: float
) -> None:
    """A lane's figures so far, replaced atomically (the parent reads it at any moment)."""
    data = {"totals": dict(totals), "found": found_in(reports), "wall": wall}
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(data))
    os.replace(temp, path)


def read_report(path: Path) -> dict[str, object]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {"totals": {}, "found": [], "wall": 0.0}


def lanes(options: argparse.Namespace) -> int:
    """`--lanes K`: K campaigns at once, each in a process, directory and warm pool of its
    own (a kill of one lane's pool never reaches another), iteration i in lane
    (i - first) mod K; the figures summed, the rates over the whole wall time. A progress
    line each minute; SIGTERM stops every lane."""
    base = options.dir or Path(tempfile.mkdtemp(prefix="jmp-chaos-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    children, paths = [], []
    started = time.monotonic()
    for j in range(options.lanes):
        path = base / f"lane-{j}.json"
        paths.append(path)
        argv = [sys.executable, "-m", "jmp_lab.chaos", "--iterations", str(options.iterations)]
        argv += ["--seed", str(options.seed), "--first", str(options.first)]
        argv += ["--lanes", str(options.lanes), "--lane", str(j), "--report", str(path)]
        argv += ["--dir", str(base / f"lane-{j}"), "--power", options.power]
        argv += ["--jmp", options.jmp] if options.jmp else []
        argv += ["--keep"] if options.keep else []
        argv += ["--short"] if options.short else []
        argv += ["--quick"] if options.quick else []
        argv += ["--minutes", str(options.minutes)] if options.minutes is not None else []
        argv += ["--model", options.model] if options.model else []
        argv += ["--aim", options.aim] if options.aim else []
        children.append(subprocess.Popen(argv))

    def stop(*_: object) -> None:
        for child in children:
            child.terminate()

    signal.signal(signal.SIGTERM, stop)
    next_line = started + 60
    while any(child.poll() is None for child in children):
        time.sleep(1)
        if time.monotonic() >= next_line:
            next_line += 60
            totals = summed([read_report(p) for p in paths])
            minutes = (time.monotonic() - started) / 60
            print(
                f"progress {minutes:.0f} min: {totals['iterations']} iterations, "
                f"{totals['kills']} kills ({totals['kills'] / minutes:.1f}/min), "
                f"{totals['cuts']} cuts ({totals['cuts'] / minutes:.1f}/min), "
                f"{totals['violations']} violations, load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
                flush=True,
            )
    wall = time.monotonic() - started
    results = [read_report(p) for p in paths]
    totals = summed(results)
    totals["lanes"] = options.lanes
    failed = [j for j, child in enumerate(children) if child.returncode not in (0, 1)]
    print(table(totals, wall))
    print_found([entry for r in results for entry in r["found"]], options)  # type: ignore[attr-defined]
    for j in failed:
        print(f"LANE {j} ended with code {children[j].returncode}: its figures may be short")
    return 1 if totals["violations"] or failed else 0


def summed(results: list[dict[str, object]]) -> Counter[str]:
    totals: Counter[str] = Counter()
    for result in results:
        totals.update(result["totals"])  # type: ignore[arg-type]
    return totals


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["crash-states"]:  # the exhaustive explorer (jmp_lab/chaos/explore)
        from jmp_lab.chaos.explore.cli import main as crash_states

        return crash_states(argv[1:])
    if argv[:1] == ["rendered"]:  # kills during rendered fetches (jmp_lab/chaos/rendered.py)
        from jmp_lab.chaos.rendered import main as rendered

        return rendered(argv[1:])
    parser = argparse.ArgumentParser(
        prog=program("jmp-chaos", "jmp_lab.chaos"), description=__doc__
    )
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first iteration")
    parser.add_argument("--jmp", default=None, help="command line of the jmp under test")
    parser.add_argument("--dir", type=Path, default=None, help="where iterations run")
    parser.add_argument("--keep", action="store_true", help="keep every iteration's directory")
    parser.add_argument("--short", action="store_true", help="one request, at most two kills")
    parser.add_argument(
        "--quick", action="store_true", help="short iterations aimed at kill points, 3-6 kills"
    )
    parser.add_argument("--minutes", type=float, default=None, help="start no iteration after")
    parser.add_argument("--power", choices=POWER_MODES, default="off", help="power iterations")
    parser.add_argument("--model", choices=MODELS, default=None, help="the disk's model")
    parser.add_argument("--aim", default=None, help="one cut, at one point (plan.Cut fields)")
    parser.add_argument(
        "--lanes", type=int, default=1, help="iterations run this many at a time (processes)"
    )
    parser.add_argument("--lane", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.lanes < 1 or not 0 <= (options.lane or 0) < options.lanes:
        parser.error("--lanes must be at least 1")
    reason = available() if options.power != "off" else None
    if reason is not None:
        print(f"python -m jmp_lab.chaos: power cuts cannot run here: {reason}", file=sys.stderr)
        print("  (--power off runs the kill campaign alone)", file=sys.stderr)
        return 2
    if options.lanes > 1 and options.lane is None:
        return lanes(options)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the current run with us
    report_to = options.report

    def progress(totals: Counter[str], reports: list[IterationReport], wall: float) -> None:
        if report_to is not None:
            write_report(report_to, totals, reports, wall)

    totals, reports, wall = campaign(
        options.iterations,
        options.seed,
        options.first,
        options.jmp,
        options.dir,
        options.keep,
        short=options.short,
        minutes=options.minutes,
        power=options.power,
        model=options.model,
        aim=options.aim,
        lane=(options.lane or 0, options.lanes),
        quick=options.quick,
        progress=progress,
    )
    if report_to is not None:  # a lane: the parent prints
        write_report(report_to, totals, reports, wall)
        return 1 if totals["violations"] else 0
    print(table(totals, wall))
    print_found(found_in(reports), options)
    return 1 if totals["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
