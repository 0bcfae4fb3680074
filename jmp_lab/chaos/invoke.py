"""One CLI invocation of jmp with at most one armed kill and at most one fault.

Triggers: `route` (the nth Jev request arrives; the kill lands before it is answered),
`generate` (the nth Flash stream, at a planned chunk), `tool` (the nth witness line appears:
the command or MCP call is running), `between` (the nth persisted record was printed). A power
cut (`Cut`) may also land right after the nth printed record of a kind (`event`), at the nth
operation of the disk on a matching path (`fs`: the disk freezes itself there), or at a random
moment; it freezes the disk, kills every process of the run, and cuts (cutting.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from jmp_lab.chaos import targets
from jmp_lab.chaos.cutting import CutLanding
from jmp_lab.chaos.plan import Cut, Fault, Kill
from jmp_lab.chaos.world import World

ROOT = Path(__file__).resolve().parent.parent.parent
INVOCATION_TIMEOUT_S = 180.0


def jmp_command(spec: str | None) -> list[str]:
    """The jmp under test: --jmp / JMP_CHAOS_JMP (any command line like `python main.py`)."""
    spec = spec or os.environ.get("JMP_CHAOS_JMP")
    return shlex.split(spec) if spec else [sys.executable, str(ROOT / "main.py")]


@dataclass
class Delivered:
    target: str
    phase: str
    pid: int
    tear: float | None = None


@dataclass
class Outcome:
    args: list[str]
    code: int | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # when each line was read (monotonic)
    stdout: str = ""
    stderr: str = ""
    kills: list[Delivered] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)  # targets not alive at their moment
    cut: Cut | None = None  # the power cut that ended this invocation
    lost: dict[str, Any] = field(default_factory=dict)  # what the cut took (the disk's report)
    before: dict[str, bytes] = field(default_factory=dict)  # the session files just before it
    disk: dict[str, Any] = field(default_factory=dict)  # the disk's status at the end
    hung: bool = False
    seconds: float = 0.0

    @property
    def result(self) -> dict[str, Any] | None:
        last = self.lines[-1] if self.lines else None
        return last.get("data") if last and last.get("kind") == "result" else None

    @property
    def status(self) -> str | None:
        return (self.result or {}).get("status")


class Invocation(CutLanding):
    """Start jmp, arm the kills' triggers in turn, wait for the end (a hang is killed).

    `kills` is the iteration's queue: each delivered or missed kill is popped, and the next one
    is armed in the same invocation unless the kernel itself was killed. `seen[0]` counts the
    armed kill's moments since it was armed (a kill planned for the 3rd route may land in the
    next invocation)."""

    def __init__(
        self,
        world: World,
        command: list[str],
        args: list[str],
        kills: list[Kill | Cut],
        fault: Fault | None,
        seen: list[int],
    ) -> None:
        self.world = world
        self.command = command
        self.out = Outcome(args)
        self.queue = kills
        self.fault = fault
        self.census: targets.Census | None = None
        self.seen = seen  # occurrences of the armed kill's phase, across invocations
        self._stream: Kill | None = None  # generate: the armed kill's stream is being sent
        self._stopped = False
        self._lock = threading.RLock()
        self._done = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._since: list[dict[str, Any]] = []  # records printed in this invocation
        self._cutting = threading.Event()  # a cut has begun (in whichever thread fired it)
        self._cut_done = threading.Event()

    # --- the kill -------------------------------------------------------------------

    @property
    def kill(self) -> Kill | Cut | None:
        return None if self._stopped or not self.queue else self.queue[0]

    def _fire(self, kill: Kill | Cut) -> None:
        """Kill the armed target now; record a miss when it is not alive."""
        proc = self._proc
        if isinstance(kill, Cut):
            self._cut(kill)
            return
        with self._lock:
            if proc is None or self.kill is not kill:
                return
            lock = self.world.log_path()
            holder = lock.with_name("lock") if lock else None
            markers = (str(self.world.root), str(self.world.warm))
            pid = targets.find(kill.target, proc.pid, holder, markers)
            if self.census is not None:
                self.census.sample(proc.pid)
            self.queue.pop(0)
            self.seen[0], self._stream = 0, None
            if pid is None or not targets.sigkill(pid):
                self.out.missed.append(kill.target)
                return
            self.out.kills.append(Delivered(kill.target, kill.phase, pid, kill.tear))
            self._stopped = kill.target == "kernel"

    def _occurrence(self, phase: str) -> Kill | Cut | None:
        """Count one occurrence of `phase`; the armed kill when this is its moment."""
        with self._lock:
            kill = self.kill
            if kill is None or kill.phase != phase:
                return None
            self.seen[0] += 1
            return kill if self.seen[0] == kill.nth else None

    def _on_route(self) -> None:
        kill = self._occurrence("route")
        if kill:
            self._fire(kill)

    def _on_chunk(self, n: int, last: bool) -> None:
        if n == 0:
            self._stream = self._occurrence("generate")
        kill = self._stream
        if kill is not None and (n == kill.chunk or last):
            self._fire(kill)

    def _watch_tools(self) -> None:
        """The tool phase: a new witness line means a command or MCP call is running."""
        files = [self.world.workspace / "witness.log", self.world.workspace / "mcp_witness.log"]

        def lines() -> int:
            return sum(len(f.read_bytes().splitlines()) for f in files if f.exists())

        seen = lines()
        while not self._done.wait(0.01):
            now = lines()
            for _ in range(now - seen):
                kill = self._occurrence("tool")
                if kill:
                    time.sleep(kill.delay)
                    self._fire(kill)
            seen = now

    def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        chunks = []
        for line in self._proc.stdout:
            chunks.append(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue
            self.out.lines.append(record)
            self.out.times.append(time.monotonic())
            with self._lock:
                self._since.append(record)
            if record.get("kind") == "session" and record.get("session_id"):
                self.world.session_id = record["session_id"]
            kill = self._occurrence("between") if record.get("seq") is not None else None
            armed = self.kill
            if isinstance(armed, Cut) and armed.phase == "event" and record.get("seq"):
                kill = self._occurrence("event") if record.get("kind") == armed.kind else None
            if kill:
                self._fire(kill)
        self.out.stdout = "".join(chunks)

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        self.out.stderr = self._proc.stderr.read()

    def _sample(self) -> None:
        # Each sample walks every process of the machine (psutil's children): on two shared
        # cores, ten a second of two lanes took a tenth of a core. Pool-forked workers and
        # late spawns are found by their marks anyway (targets.Census).
        while not self._done.wait(0.25):
            if self.census is not None and self._proc is not None:
                self.census.sample(self._proc.pid)

    # --- the run --------------------------------------------------------------------

    def run(self, census: targets.Census) -> Outcome:
        self.census = census
        world = self.world
        if self.fault and self.fault.kind != "fsize":
            world.server_fault(self.fault.kind, self.fault.value)
        world.on_route, world.on_chunk = self._on_route, self._on_chunk
        if world.disk is not None:
            world.disk.arm(self._rules())
        started = time.monotonic()
        self._proc = proc = subprocess.Popen(
            [*self.command, "--json", *self.out.args],
            cwd=world.workspace,
            env=world.env(dict(os.environ)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        if self.fault and self.fault.kind == "fsize":
            self._limit_file_size(proc.pid, int(self.fault.value))
        threads = [
            threading.Thread(target=f, daemon=True)
            for f in (
                self._read_stdout,
                self._read_stderr,
                self._watch_tools,
                self._sample,
                self._watch_disk,
            )
        ]
        for thread in threads:
            thread.start()
        try:
            proc.wait(timeout=INVOCATION_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.out.hung = True
            targets.sigkill(proc.pid)
            proc.wait()
        except BaseException:  # the runner is stopping: take the run with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        if self._cutting.is_set():
            self._cut_done.wait(INVOCATION_TIMEOUT_S)  # the disk is back to its image
        self.out.code = proc.returncode
        self._done.set()
        for thread in threads:
            thread.join(timeout=10)
        if self._cutting.is_set():  # a cut that began after the run ended: its disk is cut too
            self._cut_done.wait(INVOCATION_TIMEOUT_S)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        world.on_route = world.on_chunk = None
        world.clear_faults()
        if world.disk is not None and self.out.cut is None:
            self.out.disk = world.disk.status()
            if self.out.disk["state"] == "frozen":  # it froze as the run ended: cut it now
                armed = self.queue[0] if self.queue else None
                self._stopped = False
                if isinstance(armed, Cut):
                    self._cut(armed)
                else:
                    world.disk.call("thaw")
        self.out.seconds = time.monotonic() - started
        return self.out

    def _limit_file_size(self, pid: int, slack: int) -> None:
        """RLIMIT_FSIZE on the kernel (inherited by its workers): a write past it fails."""
        path = self.world.log_path()
        size = path.stat().st_size if path and path.exists() else 0
        limit = size + slack
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).rlimit(psutil.RLIMIT_FSIZE, (limit, limit))
