"""`python -m tests.chaos --iterations N --seed S [--first I] [--jmp CMD] [--keep]`

Runs N iterations (plans seed:first .. seed:first+N-1), prints the table of figures and, for
each violation, the kept directory and the command that reproduces it. Exit 1 on violations.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.chaos.drive import IterationReport, run_iteration
from tests.chaos.invoke import jmp_command
from tests.chaos.plan import make_plan
from tests.chaos.targets import stop_pool


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
) -> tuple[Counter[str], list[IterationReport], float]:
    """Run the iterations in order; returns the summed figures, the reports and wall time.
    `warm`: a pool directory the caller owns (the suite's, already preloaded), else the
    campaign's own (`base/warm`, stopped at the end); a kill of the pool hits it either way."""
    command = jmp_command(jmp)
    base = base or Path(tempfile.mkdtemp(prefix="jmp-chaos-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    totals: Counter[str] = Counter()
    reports = []
    started = time.monotonic()
    try:
        for index in range(first, first + iterations):
            if minutes is not None and time.monotonic() - started > minutes * 60:
                break  # the time budget is spent: no new iteration starts
            plan = make_plan(seed, index, short=short)
            report = run_iteration(plan, base, command, keep=keep, warm=warm)
            reports.append(report)
            totals.update(report.figures)
            totals["iterations"] += 1
            totals["violations"] += len(report.violations)
            if log:
                print(
                    f"iteration {index}: {report.figures['kills']} kill(s), "
                    f"{len(report.violations)} violation(s), {report.seconds:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if warm is None:
            stop_pool(base / "warm")
    return totals, reports, time.monotonic() - started


def table(totals: Counter[str], wall: float) -> str:
    """The figures, one per line, aligned; wall time last."""
    order = ["iterations", "invocations", "kills"]
    rest = sorted(k for k in totals if k not in order)
    width = max(len(k) for k in [*order, *rest, "wall time"])
    lines = [f"{key:<{width}}  {totals.get(key, 0)}" for key in [*order, *rest]]
    lines.append(f"{'wall time':<{width}}  {wall:.0f} s")
    return "\n".join(lines)


def reproduce(seed: int, index: int, jmp: str | None, short: bool = False) -> str:
    extra = (" --short" if short else "") + (f" --jmp {shlex.quote(jmp)}" if jmp else "")
    return f"python -m tests.chaos --seed {seed} --first {index} --iterations 1 --keep{extra}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first iteration")
    parser.add_argument("--jmp", default=None, help="command line of the jmp under test")
    parser.add_argument("--dir", type=Path, default=None, help="where iterations run")
    parser.add_argument("--keep", action="store_true", help="keep every iteration's directory")
    parser.add_argument("--short", action="store_true", help="one request, at most two kills")
    parser.add_argument("--minutes", type=float, default=None, help="start no iteration after")
    options = parser.parse_args(argv)
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
    )
    print(table(totals, wall))
    for report in reports:
        for violation in report.violations:
            print(f"VIOLATION iteration {report.plan.index}: {violation}")
        if report.violations:
            print(f"  kept: {report.root}")
            again = reproduce(options.seed, report.plan.index, options.jmp, options.short)
            print(f"  reproduce: {again}")
    return 1 if totals["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
