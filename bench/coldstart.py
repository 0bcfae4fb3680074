"""Cold start vs warm pool: launch of `jmp --json` to its first Jev request, its first tool
effect and its exit, for a one-step task against the loopback servers.

The task routes `bash`, generates `date +%s.%N > t.txt` (the effect carries its own clock) and
finishes. Cold runs set JMP_WARM=0; warm runs use a private pool (every kind preloaded) that is
ready before the first run and killed at the end. Runs alternate cold/warm (the machine is
shared); the table gives medians beside a bare `python -c pass` and the import of the OpenHands
executors. Goals (issue 11): warm first request <= 5x the bare interpreter; warm first effect
<= 0.1x the executor import.
"""

from __future__ import annotations

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

from tests.servers.flash import FlashServer
from tests.servers.jev import JevServer
from tests.support.cli import Cli
from tests.support.warm import PoolProc, pool_pids

RUNS = 3
ROOT = Path(__file__).resolve().parent.parent
IMPORT = (
    "from openhands.tools.terminal.impl import TerminalExecutor\n"
    "from openhands.tools.file_editor.impl import FileEditorExecutor\n"
)


def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.time()
    subprocess.run(argv, env=env, cwd=str(ROOT), check=True, capture_output=True)
    return time.time() - start


def _one(tmp: Path, jev: JevServer, flash: FlashServer, env: dict[str, str]) -> dict[str, float]:
    """One launch: seconds from launch to the first Jev request, the effect, the exit."""
    jmp = Cli(tmp, jev, flash)
    jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"command": "date +%s.%N > t.txt"}}}])
    flash.queue([{"text": "done"}])
    first: list[float] = []
    recorder = jev.state.recorder
    original = recorder.add

    def stamp(*args: Any) -> None:
        first.append(time.time())
        original(*args)

    recorder.add = stamp  # type: ignore[method-assign]
    try:
        start = time.time()
        proc = subprocess.run(
            jmp.argv("--workspace", str(jmp.workspace), "stamp the time"),
            env=jmp.env() | env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        end = time.time()
    finally:
        recorder.add = original  # type: ignore[method-assign]
    if proc.returncode != 0:
        errors = [line for line in proc.stdout.splitlines() if '"error"' in line][-3:]
        raise RuntimeError(f"jmp exited {proc.returncode}: {errors} {proc.stderr[-2000:]}")
    effect = float((jmp.workspace / "t.txt").read_text())
    return {"jev": first[0] - start, "effect": effect - start, "exit": end - start}


def run() -> str:
    bare = statistics.median(_timed([sys.executable, "-c", "pass"]) for _ in range(5))
    imports = statistics.median(
        _timed([sys.executable, "-c", IMPORT], env=os.environ | {"LOG_LEVEL": "WARNING"})
        for _ in range(2)
    )
    pool_dir = Path(tempfile.mkdtemp(prefix="jwb", dir="/tmp"))
    pool = PoolProc(pool_dir, preload="all", ready_s=600)
    results: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    try:
        with JevServer() as jev, FlashServer() as flash:
            for _ in range(RUNS):
                for mode in ("cold", "warm"):
                    tmp = Path(tempfile.mkdtemp(prefix="jb", dir="/tmp"))
                    env = {
                        "JMP_WARM": "0" if mode == "cold" else "1",
                        "JMP_WARM_DIR": str(pool_dir),
                    }
                    try:
                        results[mode].append(_one(tmp, jev, flash, env))
                    finally:
                        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        pool.kill()
        for pid in pool_pids(pool_dir):  # one a kernel may have started after a failed connect
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(pool_dir, ignore_errors=True)
    return _table(results, bare, imports)


def _table(results: dict[str, list[dict[str, float]]], bare: float, imports: float) -> str:
    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in results[mode])

    rows = [
        ("first Jev request reaches the server", "jev"),
        ("the command's effect (its own clock)", "effect"),
        ("process exit", "exit"),
    ]
    lines = [
        f"one-step `jmp --json` task, loopback servers, median of {RUNS} launches (seconds)",
        "",
        "| from launch | cold (JMP_WARM=0) | warm pool |",
        "|---|---|---|",
    ]
    lines += [f"| {label} | {med('cold', k):.3f} | {med('warm', k):.3f} |" for label, k in rows]
    lines += [
        f"| for scale: `python -c pass` | {bare:.3f} | |",
        f"| for scale: importing the OpenHands executors | {imports:.3f} | |",
        "",
        f"warm first request / bare interpreter: {med('warm', 'jev') / bare:.1f}x (goal <= 5x)",
        f"warm first effect / executor import: {med('warm', 'effect') / imports:.3f}x"
        " (goal <= 0.1x)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
