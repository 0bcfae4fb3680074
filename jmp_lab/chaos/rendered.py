"""Kills of the harness worker during rendered fetches: `jmp-chaos rendered`.

`jmp-chaos rendered --iterations N --seed S [--first I]` (`python -m jmp_lab.chaos rendered`,
`make chaos-rendered`): each iteration runs examples/research_task.py with
`"provider": "chromium"` on the script-made site (jmp_lab/servers/rendered.py) against the
loopback Jev, alternately on a warm worker (the environment's pool, as the user's runs) and a
cold one (`JMP_WARM=0`), and SIGKILLs the harness worker while Chromium renders a page: the
entry page (while its late section is still loading: nothing captured yet) or a link (while its
document is held: the entry page captured before), in turn (iteration i: warm when i is even,
the entry page when i % 4 < 2), at a moment in that window drawn from the seed. Invariants,
each a violation when broken:

- no browser process survives: every process seen under the worker just before the kill
  (Playwright's driver, Chromium and its helpers) and every process holding the iteration's
  environment mark (`MARK_ENV`; Chromium's crash handler leaves its parent at start) is gone;
- the fetch surfaces as documented: the run ends `blocked` (exit 2) with exactly one
  `tool_uncertain` for `web.open_link`, cause `worker_exit`;
- the evidence already captured is intact: the log holds every `tool_finished` before the kill
  with its script-made text, `jev-harness inspect` reads the session (exit 0), and the page that
  was being rendered was requested once (never re-fetched).

Prints one line per iteration, then the chaos runner's table (jmp_lab/chaos/figures.py:
iterations, kills by path and point, violations by class, wall time) and, for each violation,
the command that reproduces it; exit 1 on any violation, 2 where no browser is installed (it
says which part is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from jmp_lab.chaos.figures import table
from jmp_lab.servers.jev import JevServer
from jmp_lab.servers.rendered import JS_MARKER, RenderedSite
from kernel.config.install import program

ROOT = Path(__file__).resolve().parents[2]
RESEARCH = ROOT / "examples" / "research_task.py"
MARK_ENV = "JEV_CHAOS_BROWSER_RUN"  # inherited by the browser: how its processes are found
POINTS = ("entry", "link")
KEY = "jev-chaos-rendered-key-0123456789"
_STRIPPED = ("JMP_", "JEV_", "FLASH_", "TYPESAFE_")
_KEPT = ("JMP_WARM", "JMP_WARM_DIR")


def browser_processes(mark: str) -> list[psutil.Process]:
    """Running processes (zombies aside) of a browser or Playwright's driver whose environment
    holds `mark` as a value: what a run's browser left behind."""
    found = []
    for proc in psutil.process_iter(["name", "exe", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            exe = (proc.info["exe"] or proc.info["name"] or "").lower()
            if not any(n in exe for n in ("chrom", "node", "playwright", "crashpad")):
                continue
            if mark in proc.environ().values():
                found.append(proc)
        except psutil.Error:
            continue
    return found


def browser_of(worker: psutil.Process) -> list[psutil.Process]:
    """The worker's descendants that belong to the browser (Playwright's driver, Chromium)."""
    found = []
    for proc in worker.children(recursive=True):
        try:
            if any(n in " ".join(proc.cmdline()) for n in ("chromium", "playwright")):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def harness_worker(kernel_pid: int) -> psutil.Process | None:
    """The harness worker serving `kernel_pid`: its child (cold), or a pool's child that holds
    a pidfd of it (warm), as tests/support/warm.py finds workers."""
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        argv = proc.info["cmdline"] or []
        if "workers.harness" not in argv:
            continue
        if proc.info["ppid"] == kernel_pid or kernel_pid in _pidfd_targets(proc.pid):
            return proc
    return None


def _pidfd_targets(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return found
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("Pid:"):
                        found.add(int(line.split()[1]))
        except (OSError, ValueError):
            continue
    return found


@dataclass
class Iteration:
    warm: bool
    point: str
    delay_s: float
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    index: int = 0

    def line(self) -> str:
        path = "warm" if self.warm else "cold"
        verdict = "ok" if not self.violations else "; ".join(self.violations)
        return f"{path:4} kill during {self.point:5} (+{self.delay_s:.2f} s): {verdict}"


def _env(home: Path, jev: JevServer, mark: str, warm: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED) or k in _KEPT}
    env.update(
        TYPESAFE_BASE_URL=jev.url,
        TYPESAFE_API_KEY=KEY,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(ROOT),
        JMP_SESSIONS_DIR=str(home / "sessions"),
        **{MARK_ENV: mark},
    )
    if not warm:
        env["JMP_WARM"] = "0"
    return env


def iterate(warm: bool, point: str, delay_s: float, base: Path) -> Iteration:
    """One run, one kill during a rendered fetch, its invariants checked."""
    it = Iteration(warm, point, delay_s)
    started = time.monotonic()
    mark = uuid.uuid4().hex
    home = Path(tempfile.mkdtemp(prefix="rendered-", dir=base))
    (home / "work").mkdir()
    held = "/api/late" if point == "entry" else "/slow"  # what keeps the render going
    page = "/" if point == "entry" else "/slow"
    with JevServer() as jev, RenderedSite(late_s=120, slow_s=120) as site:
        jev.script([{"tool": "web.open_link"}, {"web.open_link.link": "slow"}])
        inputs = {
            "url": site.url + "/",
            "allowed_origins": [site.url],
            "markers": {"answer": "never-there"},
            "output": "report.json",
            "provider": "chromium",
        }
        argv = [
            sys.executable,
            "-m",
            "jev_harness.cli",
            "run",
            str(RESEARCH),
            "--goal",
            "read the held page",
            "--inputs",
            json.dumps(inputs),
            "--json",
        ]
        env = _env(home, jev, mark, warm)
        proc = subprocess.Popen(
            argv, cwd=home / "work", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        browser: list[psutil.Process] = []
        try:
            if not site.wait_for(held, timeout=180, alive=lambda: proc.poll() is None):
                proc.kill()
                stdout, stderr = proc.communicate()
                it.violations.append(f"the browser never asked for {held}: {stderr[-2000:]!r}")
            else:
                time.sleep(delay_s)  # a random moment while the page is held
                worker = harness_worker(proc.pid)
                if worker is None:
                    it.violations.append("no harness worker found")
                else:
                    browser = browser_of(worker)
                    worker.send_signal(signal.SIGKILL)
                stdout, _stderr = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        it.violations += _check(proc.returncode, stdout, browser, mark, point, env, home)
        site.release_slow()
        if site.count(page) != 1:
            it.violations.append("the page being rendered was requested again")
    it.seconds = time.monotonic() - started
    return it


def _check(
    code: int,
    stdout: bytes,
    browser: list[psutil.Process],
    mark: str,
    point: str,
    env: dict[str, str],
    home: Path,
) -> list[str]:
    bad = []
    if not browser:
        bad.append("no browser process was seen under the worker")
    alive = psutil.wait_procs(browser, timeout=60)[1]
    alive += psutil.wait_procs(browser_processes(mark), timeout=60)[1]
    if alive:
        bad.append(f"browser processes survived: {sorted({p.pid for p in alive})}")
    lines = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    result = lines[-1]["data"] if lines and lines[-1].get("kind") == "result" else {}
    events = [ln for ln in lines if "kind" in ln]
    uncertain = [e["data"] for e in events if e["kind"] == "tool_uncertain"]
    if code != 2 or result.get("status") != "blocked":
        bad.append(f"the run ended {code} {result.get('status')!r}, not 2 'blocked'")
    if len(uncertain) != 1 or uncertain[0].get("tool") != "web.open_link":
        bad.append(f"{len(uncertain)} tool_uncertain records, not one for web.open_link")
    elif uncertain[0].get("cause") != "worker_exit":
        bad.append(f"tool_uncertain cause {uncertain[0].get('cause')!r}, not 'worker_exit'")
    finished = [e["data"] for e in events if e["kind"] == "tool_finished"]
    if len(finished) != (1 if point == "link" else 0):
        bad.append(f"{len(finished)} captures before the kill")
    if point == "link" and finished and JS_MARKER not in json.dumps(finished[0]):
        bad.append("the capture before the kill lost its script-made text")
    session = result.get("session_id")
    if session:
        inspect = subprocess.run(
            [sys.executable, "-m", "jev_harness.cli", "inspect", str(session), "--json"],
            cwd=home / "work",
            env=env,
            capture_output=True,
            timeout=120,
        )
        if inspect.returncode != 0:
            bad.append(f"inspect exited {inspect.returncode}")
    else:
        bad.append("the run named no session")
    return bad


def campaign(iterations: int, seed: int, base: Path, first: int = 0) -> list[Iteration]:
    """Iteration i: warm when i is even, the entry page for i % 4 < 2, else a link."""
    done = []
    for i in range(first, first + iterations):
        rng = random.Random(f"{seed}:{i}")
        point = POINTS[(i // 2) % 2]
        it = iterate(i % 2 == 0, point, round(rng.uniform(0.0, 1.0), 2), base)
        it.index = i
        print(it.line(), file=sys.stderr, flush=True)
        done.append(it)
    return done


def figures(done: list[Iteration]) -> Counter[str]:
    """The table's figures: iterations, runs, kills (by path and point), violations by class."""
    totals: Counter[str] = Counter()
    for it in done:
        totals["iterations"] += 1
        totals["invocations"] += 1
        totals["kills"] += 1
        totals[f"kills: {'warm' if it.warm else 'cold'}"] += 1
        totals[f"kills: during {it.point}"] += 1
        totals["violations"] += len(it.violations)
        for violation in it.violations:
            totals[f"violations: {violation.split(':', 1)[0][:60]}"] += 1
    return totals


def main(argv: list[str] | None = None) -> int:
    prog = f"{program('jmp-chaos', 'jmp_lab.chaos')} rendered"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="the first iteration's index")
    args = parser.parse_args(argv)
    from jev_harness.web.browser import find_chromium, playwright_missing
    from jev_harness.web.page import WebError

    try:
        find_chromium()
        missing = playwright_missing()
    except WebError as exc:
        missing = exc.message
    if missing:
        print(f"{prog}: no browser: {missing}", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jmp-chaos-rendered-") as base:
        done = campaign(args.iterations, args.seed, Path(base), args.first)
    print(table(figures(done), time.monotonic() - started))
    for it in done:
        for violation in it.violations:
            print(f"VIOLATION iteration {it.index}: {violation}")
        if it.violations:
            again = f"jmp-chaos rendered --seed {args.seed} --first {it.index} --iterations 1"
            print(f"  reproduce: {again}")
    return 1 if any(it.violations for it in done) else 0


if __name__ == "__main__":
    raise SystemExit(main())
