"""Cold start vs warm pool: launch of `jmp --json` to its first Jev request, its first tool
effect and its exit, for a one-step task against the loopback servers; and the first run after
the pool has been idle longer than the old default (issue 25).

The task routes `bash`, generates `date +%s.%N > t.txt` (the effect carries its own clock) and
finishes. Cold runs set JMP_WARM=0; warm runs use a private pool (every kind preloaded) that is
ready before the first run and killed at the end. "After idle" runs use a pool started as the
first run of the day starts one (the default idle time, every kind preloaded) whose one clock
is moved on by IDLE_S (15 minutes, longer than the old 600 s default) before each of its runs,
the mechanism of tests/workers/test_warm_pool.py (`aged_pool`): no wait. Runs alternate between
the modes (the machine is shared); the table gives medians beside a bare `python -c pass` and
the import of the OpenHands executors, then the pool's resident memory (RSS and USS of the pool
process, which preloads every worker kind's modules, and of any worker it forked still alive).
Beside them, `jmp --version` and `jmp --help` (main.py) against the same bare starts. Goals
(issue 33): warm first request <= 3x the bare interpreter; warm first effect <= 0.1x the executor
import; cold first effect <= 5 s; `--version` and `--help` <= 1.5x the bare interpreter; (issue
25) the run after a long idle as warm as any.

    python -m bench.coldstart [--runs N] [--modes cold,warm,idle] [--old ROOT] [--before ROOT]
                              [--trace DIR]

`--old ROOT` adds a cold column for another checkout (e.g. `git worktree add /tmp/old 75c1a98`),
its launches interleaved with ours, so "cold no slower than before" is a ratio from one run;
`--before ROOT` adds that checkout's cold and warm columns (its own pool), for before/after.
`--trace DIR` writes, for each launch (every column), DIR/MODE-N.txt: the seconds from launch
at which the kernel process first looked for each module (a finder first on `sys.meta_path`),
headed by when the first Jev request arrived: where the path to it goes (issue 33).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import Cli
from tests.support.warm import PoolProc, aged_pool, ask_status, make_pool_dir, pool_pids

RUNS = 3
IDLE_S = 900  # the pool's clock moves on this much before each "after idle" run (old default 600)
ROOT = Path(__file__).resolve().parent.parent
# Runs main.py (argv[1]) after putting a finder first on sys.meta_path that notes when each
# module is first looked for, in seconds since JMP_BENCH_T0; written to JMP_BENCH_TRACE at exit.
TRACER = """
import atexit, os, runpy, sys, time
T0, LOG = float(os.environ["JMP_BENCH_T0"]), []
class Noted:
    @staticmethod
    def find_spec(name, path=None, target=None):
        LOG.append(f"{time.time() - T0:.4f} {name}")
sys.meta_path.insert(0, Noted)
atexit.register(lambda: open(os.environ["JMP_BENCH_TRACE"], "w").write("\\n".join(LOG) + "\\n"))
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(sys.argv[0])
runpy.run_path(sys.argv[0], run_name="__main__")
"""
IMPORT = (
    "from openhands.tools.terminal.impl import TerminalExecutor\n"
    "from openhands.tools.file_editor.impl import FileEditorExecutor\n"
)


def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.time()
    subprocess.run(argv, env=env, cwd=str(ROOT), check=True, capture_output=True)
    return time.time() - start


def _one(
    tmp: Path,
    jev: JevServer,
    flash: FlashServer,
    env: dict[str, str],
    root: Path = ROOT,
    trace: Path | None = None,
) -> dict[str, float]:
    """One launch of `root`'s main.py: seconds to the first Jev request, the effect, the exit;
    `trace`: the file for its module timeline (TRACER)."""
    jmp = Cli(tmp, jev, flash)
    jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"command": "date +%s.%N > t.txt"}}}])
    flash.queue([{"text": "done"}])
    task = ["--workspace", str(jmp.workspace), "stamp the time"]
    first: list[float] = []
    recorder = jev.state.recorder
    original = recorder.add

    def stamp(*args: Any) -> None:
        first.append(time.time())
        original(*args)

    recorder.add = stamp  # type: ignore[method-assign]
    how = ["-c", TRACER] if trace is not None else []
    traced = {"JMP_BENCH_TRACE": str(trace)} if trace is not None else {}
    try:
        start = time.time()
        proc = subprocess.run(
            [sys.executable, *how, str(root / "main.py"), "--json", *task],
            env=jmp.env() | env | traced | {"JMP_BENCH_T0": repr(start)},
            capture_output=True,
            text=True,
            timeout=900,  # a cold launch on a loaded 2-core machine
        )
        end = time.time()
    finally:
        recorder.add = original  # type: ignore[method-assign]
    if proc.returncode != 0:
        errors = [line for line in proc.stdout.splitlines() if '"error"' in line][-3:]
        raise RuntimeError(f"jmp exited {proc.returncode}: {errors} {proc.stderr[-2000:]}")
    effect = float((jmp.workspace / "t.txt").read_text())
    if trace is not None:
        lines = trace.read_text()
        trace.write_text(f"# first Jev request at {first[0] - start:.4f} s\n{lines}")
    return {"jev": first[0] - start, "effect": effect - start, "exit": end - start}


def run(
    runs: int = RUNS,
    modes: tuple[str, ...] = ("cold", "warm", "idle"),
    old: Path | None = None,
    before: Path | None = None,
    trace: Path | None = None,
) -> str:
    """`modes` of this checkout; `old`: cold launches of another checkout; `before`: cold and
    warm launches (with its own pool) of another checkout. All interleaved, run by run."""
    bares = [_timed([sys.executable, "-c", "pass"]) for _ in range(2)]
    imports = statistics.median(
        _timed([sys.executable, "-c", IMPORT], env=os.environ | {"LOG_LEVEL": "WARNING"})
        for _ in range(2)
    )
    roots = {
        "cold": ROOT,
        "warm": ROOT,
        "idle": ROOT,
        "old": old,
        "before cold": before,
        "before warm": before,
    }
    columns = [
        *modes,
        *(["old"] if old else []),
        *(["before cold", "before warm"] if before else []),
    ]
    columns = [c for c in columns if c.endswith("warm") or "cold" in modes or c != "before cold"]
    pooled = [c for c in columns if c.endswith("warm") or c == "idle"]
    dirs = {c: make_pool_dir("b") for c in pooled}
    pools = [
        PoolProc(d, preload="all", root=roots[c] or ROOT, ready_s=600)
        for c, d in dirs.items()
        if c != "idle"
    ]
    offset = Path(tempfile.mkstemp(prefix="jbclock")[1]) if "idle" in dirs else None
    aged = aged_pool(dirs["idle"], offset) if offset is not None else None
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in columns}
    about: dict[str, list[float]] = {"--version": [], "--help": []}
    memory = ""
    try:
        if aged is not None:
            _wait_ready(dirs["idle"], aged)
        with JevServer() as jev, FlashServer() as flash:
            for n in range(runs):
                # the bare start, interleaved with the launches: the ratio must see their load
                bares += [_timed([sys.executable, "-c", "pass"]) for _ in range(3)]
                for flag, times in about.items():  # one bare start, one of each, in turn
                    times += [_timed([sys.executable, str(ROOT / "main.py"), flag])]
                    bares += [_timed([sys.executable, "-c", "pass"])]
                for mode in columns:
                    tmp = Path(tempfile.mkdtemp(prefix="jb", dir="/tmp"))
                    pooled_run = mode in dirs
                    env = {"JMP_WARM": "1" if pooled_run else "0"}
                    env["JMP_WARM_DIR"] = str(dirs[mode]) if pooled_run else "/nonexistent"
                    if mode == "idle" and offset is not None:
                        offset.write_text(str(IDLE_S * (n + 1)))  # idle IDLE_S since the last
                    try:
                        noted = trace / f"{mode.replace(' ', '-')}-{n}.txt" if trace else None
                        root = roots[mode] or ROOT
                        results[mode].append(_one(tmp, jev, flash, env, root, noted))
                    finally:
                        shutil.rmtree(tmp, ignore_errors=True)
                    if mode == "idle" and aged is not None and aged.poll() is not None:
                        raise RuntimeError(f"the aged pool exited {aged.returncode} after a run")
        if aged is not None:
            memory = _memory(aged.pid)
    finally:
        for pool in pools:
            pool.kill()
        if aged is not None:
            aged.kill()
            aged.wait()
        if offset is not None:
            offset.unlink(missing_ok=True)
        for pool_dir in dirs.values():
            for pid in pool_pids(pool_dir):  # one a kernel started after a failed connect
                os.kill(pid, signal.SIGKILL)
            shutil.rmtree(pool_dir, ignore_errors=True)
    return _table(results, statistics.median(bares), imports, runs, about) + memory


def _wait_ready(directory: Path, proc: subprocess.Popen[bytes], ready_s: float = 600) -> None:
    deadline = time.monotonic() + ready_s
    while ask_status(directory) is None:  # answers once its imports are done
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the pool did not answer (exit {proc.poll()})")
        time.sleep(0.05)


def _memory(pid: int) -> str:
    """The pool's resident memory: its process and any worker it forked still alive (MB)."""
    import psutil

    pool = psutil.Process(pid)
    parts = [pool, *pool.children(recursive=True)]
    rss = sum(p.memory_info().rss for p in parts) / 2**20
    uss = sum(p.memory_full_info().uss for p in parts) / 2**20
    workers = f" and {len(parts) - 1} workers it forked" if len(parts) > 1 else ""
    return (
        f"\n\nthe pool's resident memory after the runs: {rss:.0f} MB RSS, {uss:.0f} MB USS "
        f"(the pool process, every worker kind's modules preloaded{workers}; USS is what "
        "stopping it frees)"
    )


def _table(
    results: dict[str, list[dict[str, float]]],
    bare: float,
    imports: float,
    runs: int,
    about: dict[str, list[float]],
) -> str:
    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in results[mode])

    names = {"cold": "cold (JMP_WARM=0)", "warm": "warm pool", "old": "cold, --old checkout"}
    names["idle"] = f"pool idle {IDLE_S // 60} min before each run"
    names |= {"before cold": "cold, --before checkout", "before warm": "warm, --before checkout"}
    modes = list(results)
    rows = [
        ("first Jev request reaches the server", "jev"),
        ("the command's effect (its own clock)", "effect"),
        ("process exit", "exit"),
    ]
    lines = [
        f"one-step `jmp --json` task, loopback servers, median of {runs} launches (seconds;"
        " in brackets: x `python -c pass` / x the executor import)",
        "",
        "| from launch | " + " | ".join(names[m] for m in modes) + " |",
        "|---|" + "---|" * len(modes),
    ]
    for label, k in rows:
        cells = [
            f"{med(m, k):.3f} ({med(m, k) / bare:.1f}x / {med(m, k) / imports:.3f}x)" for m in modes
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        f"| for scale: `python -c pass` | {bare:.3f} |" + " |" * (len(modes) - 1),
        f"| for scale: importing the OpenHands executors | {imports:.3f} |"
        + " |" * (len(modes) - 1),
        *(
            f"| `jmp {flag}` to its exit | {statistics.median(times):.3f}"
            f" ({statistics.median(times) / bare:.2f}x) |" + " |" * (len(modes) - 1)
            for flag, times in about.items()
        ),
        "",
    ]
    for flag, times in about.items():
        ratio = statistics.median(times) / bare
        lines.append(f"`jmp {flag}` / bare interpreter: {ratio:.2f}x (goal <= 1.5x)")
    if "warm" in results:
        lines += [
            f"warm first request / bare interpreter: {med('warm', 'jev') / bare:.1f}x (goal <= 3x)",
            f"warm first effect / executor import: {med('warm', 'effect') / imports:.3f}x"
            " (goal <= 0.1x)",
        ]
    if "cold" in results:
        lines.append(f"cold first effect: {med('cold', 'effect'):.1f} s (goal <= 5 s)")
    if "idle" in results and "cold" in results:
        ratios = ", ".join(f"{k} {med('idle', k) / med('cold', k):.3f}x" for _, k in rows)
        lines.append(
            f"after {IDLE_S} s idle (old default 600 s) / cold: {ratios} (goal: as warm as warm)"
        )
    if "idle" in results and "warm" in results:
        ratio = med("idle", "effect") / med("warm", "effect")
        lines.append(f"first effect after {IDLE_S} s idle / warm: {ratio:.2f}x")
    if "cold" in results and "old" in results:
        ratios = ", ".join(f"{k} {med('cold', k) / med('old', k):.2f}x" for _, k in rows)
        lines.append(f"cold now / cold --old checkout: {ratios} (goal: no slower)")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument(
        "--modes", default="cold,warm,idle", help="cold, warm, idle (after 15 min idle), comma"
    )
    parser.add_argument("--old", type=Path, help="another checkout, run cold beside ours")
    parser.add_argument("--before", type=Path, help="another checkout, run cold and warm")
    parser.add_argument("--trace", type=Path, help="a directory for each launch's module timeline")
    args = parser.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    old, before = (p.resolve() if p else None for p in (args.old, args.before))
    if args.trace:
        args.trace.mkdir(parents=True, exist_ok=True)
    print(run(args.runs, modes, old, before, args.trace))


if __name__ == "__main__":
    main(sys.argv[1:])
