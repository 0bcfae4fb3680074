"""One iteration: run the task with kills, power cuts and faults, drive the session on as a
user would, then check every invariant. The directory is kept when anything was violated.

Every violation is one line, `class: what happened` (the table counts them by class)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from jmp_lab.chaos import check, targets
from jmp_lab.chaos.invoke import Invocation, Outcome
from jmp_lab.chaos.plan import IterationPlan
from jmp_lab.chaos.power import PowerWatch
from jmp_lab.chaos.world import World

PROMPTS = (
    "Run the planned steps: shell commands, notes files and the witness tool.",
    "Follow-up: run the remaining planned steps too.",
)
MAX_INVOCATIONS = 14
MAX_POWER_INVOCATIONS = 20  # a cut can cost a session: the user starts over
VERBOSE = bool(os.environ.get("JMP_CHAOS_VERBOSE"))
ORPHAN_GRACE_S = 10.0
PINNED = ("session", "user", "tool_started", "tool_uncertain")  # fsynced or the request itself
# A machine so loaded that a worker does not start within the kernel's bound (a cold OpenHands
# import past 120 s): after this many such runs in a row the user gives up on the session.
# Counted in the table (`abandoned: workers not ready, machine load`), never hidden, and every
# check but "it completed" still runs on what was done.
NOT_READY = "worker not ready after"
GIVE_UP_AFTER = 2


@dataclass
class IterationReport:
    plan: IterationPlan
    root: Path
    figures: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    kept: bool = False
    abandoned: str = ""  # why the user gave up on the session (the machine's load), if so


class Driver:
    """A user at the terminal: task, reopen, acknowledge, follow-up; the plan's kills land."""

    def __init__(
        self,
        plan: IterationPlan,
        base: Path,
        command: list[str],
        warm: Path | None = None,
        restart_pool: bool = True,
        world: World | None = None,
    ) -> None:
        self.plan = plan
        self.path = "warm" if plan.warm else "cold"  # the spawn path, counted apart
        self.restart_pool = restart_pool  # after a kill of the pool: this checkout's code
        if world is None:  # else the caller's (the crash-state explorer lays its own)
            root = Path(tempfile.mkdtemp(prefix=f"c{plan.index}-", dir=base))
            world = World(plan, root, warm or base / "warm")
        root = world.root
        self.world = world
        self.command = command
        self.report = IterationReport(plan, root)
        self.census = targets.Census(str(root))
        self.kills = list(plan.kills)
        self.seen = [0]  # moments of the armed kill's phase so far
        self.interrupted: set[str] = set()
        self.cut: list[bytes] = []  # torn tails that must be archived byte for byte
        self.power = PowerWatch(self) if plan.power else None
        self.before_request: Callable[[int], None] | None = None  # e.g. a --compact before it

    def invoke(self, *args: str) -> Outcome:
        figures = self.report.figures
        number = len(self.report.outcomes)
        fault = self.plan.faults[number] if number < len(self.plan.faults) else None
        if fault:
            figures[f"fault {fault.kind}"] += 1
        out = Invocation(self.world, self.command, list(args), self.kills, fault, self.seen).run(
            self.census
        )
        self.report.outcomes.append(out)
        if self.power is not None:
            self.report.violations += self.power.after(out, fault)
        if VERBOSE:
            print(
                f"  [{self.plan.index}.{number}] {' '.join(args)[:60]!r} fault={fault} "
                f"kills={[(k.target, k.phase) for k in out.kills]} missed={out.missed} "
                f"cut={out.cut and (out.cut.phase, out.cut.kind, out.cut.nth)} -> "
                f"{out.code} {out.status} "
                f"{out.seconds:.1f}s",
                file=sys.stderr,
                flush=True,
            )
            if out.code != 0:
                for line in out.stderr.strip().splitlines()[-4:]:
                    print(f"      {line[:200]}", file=sys.stderr, flush=True)
        figures["invocations"] += 1
        figures["time: jmp runs"] += out.seconds
        for kill in out.kills:
            figures["kills"] += 1
            figures[f"kills {self.path}"] += 1
            figures[f"kill target {kill.target} ({self.path})"] += 1
            figures[f"kill phase {kill.phase}"] += 1
            if kill.tear is not None:
                self._tear(kill.tear)
        figures["kills missed (target not alive)"] += len(out.missed)
        if out.hung:
            self.report.violations.append(f"hung: invocation {number} {list(args)}; killed")
        self.interrupted |= check.interrupted(self.world.events())
        started = time.monotonic()
        left = self.census.survivors(ORPHAN_GRACE_S)
        figures["time: orphan checks"] += time.monotonic() - started
        if left:
            figures["orphans"] += len(left)
            names = ", ".join(" ".join(p.cmdline()[:4]) for p in left if p.is_running())
            self.report.violations.append(f"orphans: after invocation {number}: {names}")
            for proc in left:
                targets.sigkill(proc.pid)
        if self.restart_pool and any(k.target == "pool" for k in out.kills):
            started = time.monotonic()  # the runs that follow are warm again, as planned
            targets.start_pool(self.world.warm)
            figures["time: pool restarts"] += time.monotonic() - started
        return out

    def _tear(self, fraction: float) -> None:
        """Cut the last line at a byte offset, as a write cut short would (not a pinned one)."""
        path = self.world.log_path()
        if path is None or not path.exists():
            return
        data = path.read_bytes()
        if not data.endswith(b"\n"):
            return
        start = data.rfind(b"\n", 0, len(data) - 1) + 1
        line = data[start:-1]
        record = json.loads(line)
        if record.get("kind") in PINNED or len(line) < 2:
            self.report.figures["tears skipped (pinned last line)"] += 1
            return
        if self.power is not None:  # a line we tore was printed: it may be reused
            self.power.runner_torn.add((record.get("session_id"), record.get("seq")))
        cut = start + 1 + int((len(line) - 1) * fraction)
        self.cut.append(data[start:cut])
        with open(path, "r+b") as handle:
            handle.truncate(cut)
        self.report.figures["torn tails made"] += 1

    def users(self) -> int:
        return sum(1 for e in self.world.events() if e.get("kind") == "user")

    def _not_ready(self) -> bool:
        """The last GIVE_UP_AFTER runs all ended on a worker that never became ready."""
        last = self.report.outcomes[-GIVE_UP_AFTER:]
        return len(last) == GIVE_UP_AFTER and all(
            o.status == "error" and NOT_READY in o.stdout and not o.kills and o.cut is None
            for o in last
        )

    def drive(self) -> None:
        self.go_on(self.invoke("--workspace", str(self.world.workspace), PROMPTS[0]), 0)

    def go_on(self, out: Outcome, request: int) -> None:
        """From the outcome `out` of an invocation in request `request` (0: the task) on, as
        a user would, until every request completed (or the limit)."""
        limit = MAX_POWER_INVOCATIONS if self.power is not None else MAX_INVOCATIONS
        for _ in range(limit):
            if self._not_ready():
                self.report.abandoned = f"{GIVE_UP_AFTER} runs in a row: a worker not ready"
                return
            sid = self.world.session_id
            if sid is None:  # killed before the session existed: start over
                out = self.invoke("--workspace", str(self.world.workspace), PROMPTS[0])
                continue
            if out.status == "completed" and self.users() == request + 1:
                if request + 1 == len(self.plan.requests):
                    return
                request += 1
                if self.before_request is not None:
                    self.before_request(request)
                out = self.invoke("--session", sid, PROMPTS[request])
                continue
            prompt = [PROMPTS[request]] if self.users() < request + 1 else []
            unsettled = self._unsettled()
            if unsettled and (out.status == "blocked" or (out.kills and self.plan.ack_direct)):
                out = self.invoke("--session", sid, "--ack-interrupted", *prompt)
            else:
                out = self.invoke("--session", sid, *prompt)
        self.report.violations.append(
            f"not-completed: the session did not complete in {limit} invocations "
            f"(last status {out.status})"
        )

    def _unsettled(self) -> bool:
        events = self.world.events()
        acked = {
            e["data"].get("call_id")
            for e in events
            if e.get("kind") == "tool_uncertain" and e["data"].get("acknowledged")
        }
        return bool(check.interrupted(events) - acked)

    def verify(self) -> None:
        report, figures = self.report, self.report.figures
        found = report.violations
        log = self.world.log_path()
        if log is None or not log.exists():
            found.append("not-completed: no session log")
            return
        events, problems = check.strict_log(log)
        if problems:
            figures["corrupted logs"] += 1
        found += tag("log-corrupt", problems)
        found += tag("call-ends", check.call_ends(events, figures))
        for problem in check.witnesses(self.plan, events, self.world.workspace, figures):
            found.append(
                ("re-execution: " if "times" in problem else "effect-without-record: ") + problem
            )
        uncertain = {e["data"].get("call_id") for e in events if e.get("kind") == "tool_uncertain"}
        figures["interrupted calls"] += len(self.interrupted)
        figures["uncertain calls surfaced"] += len(self.interrupted & uncertain)
        for call_id in sorted(self.interrupted - uncertain):
            found.append(f"uncertain-not-surfaced: interrupted call {call_id} never surfaced")
        finals = [e["data"].get("status") for e in events if e.get("kind") == "final"]
        if finals and finals[-1] == "completed" and self.users() == len(self.plan.requests):
            figures["completions"] += 1
        else:
            found.append(f"not-completed: the session ended {finals[-1:]} not completed")
        found += tag("torn-unarchived", check.torn_archives(log, self.cut, events))
        figures["torn tails archived"] += len(list(log.parent.glob(log.name + ".torn-*")))
        outputs = [o.stdout + o.stderr for o in report.outcomes]
        dirs = [self.world.home, self.world.workspace]
        found += tag("leak", check.leaks(self.plan, dirs, outputs, figures))
        figures["internal errors"] += sum("internal error" in o.stderr for o in report.outcomes)
        figures["planned kills and cuts not reached"] += len(self.kills)
        if self.power is not None:
            found += self.power.final(self.world.session_id)


def tag(cls: str, problems: list[str]) -> list[str]:
    """Violations of one class: `class: problem`."""
    return [f"{cls}: {problem}" for problem in problems]


def run_iteration(
    plan: IterationPlan,
    base: Path,
    command: list[str],
    keep: bool = False,
    warm: Path | None = None,
    restart_pool: bool = True,
) -> IterationReport:
    """Run, check, and clean up (the directory stays when something was violated, or `keep`).
    `warm`: the warm pool's directory (default: the campaign's own, `base/warm`);
    `restart_pool`: start it again after a kill of it (this checkout's jmp only). Where the
    time goes is in the figures (`time: ...`, seconds)."""
    started = time.monotonic()
    driver = Driver(plan, base, command, warm, restart_pool)
    figures = driver.report.figures
    figures["time: setup"] += time.monotonic() - started
    figures[f"iterations {driver.path}"] += 1
    try:
        driver.drive()
        checked = time.monotonic()
        driver.verify()
        figures["time: final checks"] += time.monotonic() - checked
        if driver.report.abandoned:  # the machine, not jmp: counted, every other check kept
            report = driver.report
            report.figures["abandoned: workers not ready, machine load"] += 1
            report.violations = [v for v in report.violations if not v.startswith("not-comp")]
    except Exception as exc:  # a runner failure is reported, never hidden
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        driver.report.violations.append(f"runner-error: {type(exc).__name__}: {exc} ({where})")
        (driver.report.root / "runner-error.txt").write_text(traceback.format_exc())
    finally:
        report = driver.report
        report.kept = keep or bool(report.violations)
        for out in report.outcomes:
            (report.root / f"invocation-{report.outcomes.index(out)}.txt").write_text(
                f"args: {out.args}\ncode: {out.code}\nkills: {out.kills}\nmissed: {out.missed}\n"
                f"cut: {out.cut}\nlost: {json.dumps(out.lost, indent=1)}\n"
                f"--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}\n"
            ) if report.kept else None
        closed = time.monotonic()
        driver.world.close(keep=report.kept)
        figures["time: teardown"] += time.monotonic() - closed
    report.seconds = time.monotonic() - started
    figures["time: iterations"] += report.seconds
    return report
