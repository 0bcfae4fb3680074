"""Durability's cost (issue 21): one fsync on this disk, and the agent step before and after
durable-before-visible, measured side by side in one run; and this tree once more with the
kernel's fsync made a no-op, which splits the difference into waiting for the disk and the rest.

`python -m bench durability` (a few minutes). The step is bench/agent.py's jmp side (Jev
routes `read`, Flash writes the path, the tool worker views a 2-byte file; a step is the time
between two announced `tool_finished` records), run from two trees in alternation, each in a
process of its own (two kernels cannot share one): this tree, and BEFORE, the commit before
`kernel/store/commit.py` was added (JMP_BENCH_BEFORE=REV picks another), checked out for the
run into a temporary git worktree. Each tree's workers come from a warm pool of its own
(started and preloaded before its first probe, stopped at the end: no pool is shared between
the trees, and a cold OpenHands import on a loaded machine can outlast the kernel's 120 s
bound); start-up and a warm-up round are excluded.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
N = 20  # steps per measured round
ROUNDS = 2  # measured rounds per process
TURNS = 3  # processes per tree, alternating
FSYNCS = 200
GOAL_MS = 2.0  # at most this much more per step at the median


# --- one fsync ----------------------------------------------------------------------------


def fsync_costs(directory: Path, count: int = FSYNCS) -> dict[str, float]:
    """Median ms of: an appended line's fsync; a new file's data and its directory, one after
    the other and in parallel (as the group commit does)."""
    log = os.open(directory / "log", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    pool = ThreadPoolExecutor(1)
    out: dict[str, list[float]] = {"line": [], "file, then dir": [], "file and dir": []}
    try:
        for _ in range(count):
            os.write(log, b"x" * 400 + b"\n")
            start = time.perf_counter()
            os.fsync(log)
            out["line"].append(time.perf_counter() - start)
            for label in ("file, then dir", "file and dir"):
                fd = _new_file(dfd)
                start = time.perf_counter()
                if label == "file and dir":
                    other = pool.submit(os.fsync, fd)
                    os.fsync(dfd)
                    other.result()
                else:
                    os.fsync(fd)
                    os.fsync(dfd)
                out[label].append(time.perf_counter() - start)
                os.close(fd)
    finally:
        pool.shutdown()
        os.close(log)
        os.close(dfd)
    return {label: statistics.median(v) * 1000 for label, v in out.items()}


def _new_file(dfd: int) -> int:
    name = uuid.uuid4().hex
    fd = os.open(f".tmp-{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
    os.write(fd, b"{}" * 300)
    os.replace(f".tmp-{name}", name, src_dir_fd=dfd, dst_dir_fd=dfd)
    return fd


# --- the step, before and after --------------------------------------------------------------


def probe(tree: str, n: int, rounds: int) -> dict[str, Any]:
    """In a process of its own: bench/agent.py's jmp side with TREE's kernel, one warm-up
    round then `rounds` measured ones; per-step and per-phase milliseconds."""
    sys.path.insert(0, tree)
    if os.environ.get("JMP_BENCH_NO_FSYNC") == "1":  # the variant that waits for no disk
        os.fsync = os.fdatasync = lambda fd: None
    from bench.agent import JmpSide, jmp_phases

    base = Path(tempfile.mkdtemp(prefix="jbd", dir="/tmp"))
    side = JmpSide(base)
    steps: list[float] = []
    phases: dict[str, list[float]] = {}
    try:
        side.round(3)
        for _ in range(rounds):
            events = side.round(n)
            steps += side.steps(events)
            for label, values in jmp_phases(events).items():
                phases.setdefault(label, []).extend(values)
    finally:
        side.close()
        shutil.rmtree(base, ignore_errors=True)
    return {"steps": steps, "phases": phases}


def before_revision() -> str:
    chosen = os.environ.get("JMP_BENCH_BEFORE", "").strip()
    if chosen:
        return chosen
    added = _git("log", "--diff-filter=A", "--format=%H", "--", "kernel/store/commit.py")
    first = added.split()[-1] if added.split() else ""
    if not first:
        raise RuntimeError("kernel/store/commit.py has no history here: set JMP_BENCH_BEFORE")
    return f"{first}^"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout


def measure(n: int = N, rounds: int = ROUNDS, turns: int = TURNS) -> dict[str, Any]:
    revision = before_revision()
    before = Path(tempfile.mkdtemp(prefix="jbd-before-", dir="/tmp"))
    _git("worktree", "add", "--detach", str(before), revision)
    env = dict(os.environ, JMP_WARM="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.update(OPENHANDS_SUPPRESS_BANNER="1")
    trees = {"before": str(before), "after": str(ROOT), "no fsync": str(ROOT)}
    pools = {name: Path(tempfile.mkdtemp(prefix="jbp", dir="/tmp")) for name in trees}
    envs = {name: dict(env, JMP_WARM_DIR=str(pools[name])) for name in trees}
    envs["no fsync"]["JMP_BENCH_NO_FSYNC"] = "1"
    out: dict[str, Any] = {"revision": _git("rev-parse", "--short", revision).strip(), "n": n}
    for name in trees:
        out[name] = {"steps": [], "phases": {}}
    try:
        for name in trees:
            _pool(trees[name], "start", envs[name])
        for turn in range(turns):
            for name in list(trees) if turn % 2 == 0 else list(trees)[::-1]:
                got = _run_probe(trees[name], n, rounds, envs[name])
                out[name]["steps"] += got["steps"]
                for label, values in got["phases"].items():
                    out[name]["phases"].setdefault(label, []).extend(values)
        with tempfile.TemporaryDirectory(prefix="jbf", dir="/tmp") as scratch:
            out["fsync"] = fsync_costs(Path(scratch))
    finally:
        for name in trees:
            _pool(trees[name], "stop", envs[name])
            shutil.rmtree(pools[name], ignore_errors=True)
        _git("worktree", "remove", "--force", str(before))
    return out


def _pool(tree: str, command: str, env: dict[str, str]) -> None:
    """`workers.pool start|stop` of TREE's code in env's JMP_WARM_DIR (start waits for the
    preload)."""
    subprocess.run(
        [sys.executable, "-P", "-m", "workers.pool", command, env["JMP_WARM_DIR"]],
        cwd="/",
        env=dict(env, PYTHONPATH=tree),
        capture_output=True,
        check=False,
    )


def _run_probe(tree: str, n: int, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    call = f"d.probe({tree!r}, {n}, {rounds})"
    code = f"import json, bench.durability as d; print(json.dumps({call}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"the probe of {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def table(data: dict[str, Any]) -> str:
    med = statistics.median
    before, after = data["before"], data["after"]
    b, a = med(before["steps"]), med(after["steps"])

    def p90(values: list[float]) -> float:
        return sorted(values)[int(0.9 * (len(values) - 1))]

    verdict = "met" if a - b <= GOAL_MS else "NOT met"
    z = med(data["no fsync"]["steps"]) if data.get("no fsync", {}).get("steps") else None
    rows = [
        f"before = {data['revision']} (the commit before durable-before-visible), after = this "
        f"tree; {len(after['steps'])} steps each, {TURNS} alternating processes per tree",
        "",
        "| jmp step | before | after | after/before | after - before |",
        "|---|---|---|---|---|",
        f"| median ms | {b:.2f} | {a:.2f} | {a / b:.2f}x | {a - b:+.2f} |",
        f"| p90 ms | {p90(before['steps']):.2f} | {p90(after['steps']):.2f} "
        f"| {p90(after['steps']) / p90(before['steps']):.2f}x "
        f"| {p90(after['steps']) - p90(before['steps']):+.2f} |",
    ]
    for label, values in after["phases"].items():
        old = before["phases"].get(label)
        if values and old:
            rows.append(
                f"| {label} | {med(old):.2f} | {med(values):.2f} | {med(values) / med(old):.2f}x "
                f"| {med(values) - med(old):+.2f} |"
            )
    if z is not None:  # this tree again, in a process whose kernel's fsync returns at once
        rows += [
            "",
            f"This tree with the kernel's fsync a no-op: {z:.2f} ms at the median. Of the "
            f"{a - b:+.2f} ms, waiting for the disk is {a - z:+.2f} ms, and {z - b:+.2f} ms "
            "is everything else that changed since before (the group commit's handoffs, "
            "events.index, settling).",
        ]
    rows += [
        "",
        f"Goal: at most +{GOAL_MS:.0f} ms per step at the median: {verdict}.",
        "",
        "| one fsync on this disk (/tmp) | median ms |",
        "|---|---|",
    ]
    rows += [f"| {label} | {ms:.2f} |" for label, ms in data["fsync"].items()]
    return "\n".join(rows)


def run() -> str:
    return table(measure())


if __name__ == "__main__":
    print(run())
