"""`python -m jmp_lab.chaos --iterations N --seed S [--first I] [--jmp CMD] [--keep] [--power M]`

Runs N iterations (plans seed:first .. seed:first+N-1), prints the table of figures and, for
each violation, the kept directory and the command that reproduces it. Exit 1 on violations.
`--power mix` makes every odd iteration a power iteration (its sessions directory on a lossy
FUSE disk, power cuts among its kills), `--power only` every iteration; where FUSE cannot run
it says why and exits 2. `--model M` fixes the disk's model; `--aim SPEC` gives every power
iteration one cut at one point and nothing else (`phase=event,kind=user,nth=2,data=lose`:
plan.Cut's fields), a reproducer that does not depend on timing.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from jmp_lab.chaos.drive import IterationReport, run_iteration
from jmp_lab.chaos.invoke import jmp_command
from jmp_lab.chaos.plan import IterationPlan, aimed, make_plan, parse_cut
from jmp_lab.chaos.powercut.control import available
from jmp_lab.chaos.powercut.model import MODELS
from jmp_lab.chaos.targets import stop_pool

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
) -> tuple[Counter[str], list[IterationReport], float]:
    """Run the iterations in order; returns the summed figures, the reports and wall time.
    `warm`: a pool directory the caller owns (the suite's, already preloaded), else the
    campaign's own (`base/warm`, stopped at the end); a kill of the pool hits it either way.
    `power`: off, mix or only, `model` and `aim` (see the module docstring). `plans`: these
    instead of the seed's (a test aims its cuts)."""
    command = jmp_command(jmp)
    base = base or Path(tempfile.mkdtemp(prefix="jmp-chaos-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    totals: Counter[str] = Counter()
    reports = []
    started = time.monotonic()
    try:
        todo = plans or [
            make_plan(seed, i, short=short, power=is_power(power, i))
            for i in range(first, first + iterations)
        ]
        if model or aim:
            todo = [_aim(plan, model, aim) if plan.power else plan for plan in todo]
        for plan in todo:
            if minutes is not None and time.monotonic() - started > minutes * 60:
                break  # the time budget is spent: no new iteration starts
            report = run_iteration(plan, base, command, keep=keep, warm=warm)
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
    finally:
        if warm is None:
            stop_pool(base / "warm")
    return totals, reports, time.monotonic() - started


def _aim(plan: IterationPlan, model: str | None, aim: str | None) -> IterationPlan:
    if aim:
        return aimed(plan, parse_cut(aim), model)
    return dataclasses.replace(plan, power=model)


def table(totals: Counter[str], wall: float) -> str:
    """The figures, one per line, aligned; violations by class after them; rates and wall
    time last."""
    order = ["iterations", "power iterations", "invocations", "kills", "cuts"]
    classes = sorted(k for k in totals if k.startswith("violations: "))
    rest = sorted(k for k in totals if k not in order and k not in classes)
    minutes = max(wall / 60, 1e-9)
    rates = {
        "kills per minute": f"{totals.get('kills', 0) / minutes:.1f}",
        "cuts per minute": f"{totals.get('cuts', 0) / minutes:.1f}",
        "wall time": f"{wall:.0f} s",
    }
    keys = [*order, *rest, *classes, *rates]
    width = max(len(k) for k in keys)
    lines = [f"{key:<{width}}  {totals.get(key, 0)}" for key in [*order, *rest, *classes]]
    lines += [f"{key:<{width}}  {value}" for key, value in rates.items()]
    return "\n".join(lines)


def reproduce(
    seed: int,
    index: int,
    jmp: str | None,
    short: bool = False,
    power: bool = False,
    model: str | None = None,
    aim: str | None = None,
) -> str:
    extra = (" --short" if short else "") + (" --power only" if power else "")
    extra += f" --model {model}" if model and power else ""
    extra += f" --aim {shlex.quote(aim)}" if aim and power else ""
    extra += f" --jmp {shlex.quote(jmp)}" if jmp else ""
    return f"python -m jmp_lab.chaos --seed {seed} --first {index} --iterations 1 --keep{extra}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jmp_lab.chaos", description=__doc__)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first iteration")
    parser.add_argument("--jmp", default=None, help="command line of the jmp under test")
    parser.add_argument("--dir", type=Path, default=None, help="where iterations run")
    parser.add_argument("--keep", action="store_true", help="keep every iteration's directory")
    parser.add_argument("--short", action="store_true", help="one request, at most two kills")
    parser.add_argument("--minutes", type=float, default=None, help="start no iteration after")
    parser.add_argument("--power", choices=POWER_MODES, default="off", help="power iterations")
    parser.add_argument("--model", choices=MODELS, default=None, help="the disk's model")
    parser.add_argument("--aim", default=None, help="one cut, at one point (plan.Cut fields)")
    options = parser.parse_args(argv)
    reason = available() if options.power != "off" else None
    if reason is not None:
        print(f"python -m jmp_lab.chaos: power cuts cannot run here: {reason}", file=sys.stderr)
        print("  (--power off runs the kill campaign alone)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the current run with us
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
    )
    print(table(totals, wall))
    for report in reports:
        for violation in report.violations:
            print(f"VIOLATION iteration {report.plan.index}: {violation}")
        if report.violations:
            print(f"  kept: {report.root}")
            power = bool(report.plan.power)
            again = reproduce(
                options.seed,
                report.plan.index,
                options.jmp,
                options.short,
                power,
                options.model,
                options.aim,
            )
            print(f"  reproduce: {again}")
    return 1 if totals["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
