"""The scripted runs the rows assert on: one run per (scenario, spawn path, front end), shared.

A run is expensive (a cold tool worker imports OpenHands), so each scenario runs once per cell
in a test session, on first use, and every row of that scenario reads the same `Run`. A run
that raised is remembered too: each of its rows fails with the same error, none re-runs it.

- `probe`: confined (no_new_privs; as root, no capability), a hostile launch directory, all four
  keys set, keys in the prompt (or goal) and in the model's answer, an MCP server configured
  with secrets; the agent first `read`s each special file of the workspace (a FIFO, a device,
  a link out of it: `special_files`); the untrusted code (the model's shell, or the task
  script) runs tests/security/probe.py, then the run completes.
- `crash`: unconfined (so that the warm path is the pool's fork, never a fallback), under
  umask 0 (the widest: what jmp writes must be the owner's alone anyway); the
  untrusted code appends to `effect.txt` and blocks; the test kill -9s the worker that runs it
  (the tool worker, or the harness worker) and lets the run end.
- `keyfile`: as `probe` (without the hostile launch directory), but the model keys are in
  the key file alone, as `jmp --setup` leaves it, on the front ends that read it (KEY_FILE).
- `kernel_kill`: as `crash`, but the test kill -9s the process that runs the kernel (the
  front end's own), alone, and lets its workers find out.
- `unseen`: the front end in a Landlock domain of its own (writes only under /tmp, /dev,
  /proc), the suite's unconfined pool on the warm path; the untrusted code tries to write
  outside the rules (issue 32 item 1: a warm worker once escaped them).

Runs start in a background thread at collection's end (`prefetch`), so that they overlap the
rest of the suite; a row waits for its run, or runs it itself if the thread has not started it.

To add a scenario: a function `(cell) -> Run` in `SCENARIOS`, one calling `_run_once` with its
name, and a fixture of that name in conftest.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from tests.security.frontends import FRONT_ENDS, FrontEnd, Outcome
from tests.security.groups import SCENARIO_NAMES
from tests.security.paths import PATHS, SpawnPath
from tests.security.world import ESCAPES, PROBE, World, confine
from tests.support.browser import missing_browser
from tests.support.warm import processes_of, workers_of

SLEEP = "sleep 30.8642"  # the blocked command of the crash scenario; unique on the machine
RUN_TIMEOUT_S = 400  # a cold run on a loaded machine: a bound on a hang, not a speed test


@dataclass(frozen=True)
class Cell:
    path: str
    front_end: str

    @property
    def id(self) -> str:
        return f"{self.path}-{self.front_end}"

    @property
    def spawn(self) -> SpawnPath:
        return PATHS[self.path]

    @property
    def fe(self) -> FrontEnd:
        return FRONT_ENDS[self.front_end]


def cells() -> list[Cell]:
    return [Cell(p, f) for p in PATHS for f in FRONT_ENDS]


@dataclass(repr=False)
class Run:
    """One scripted run of a cell and everything the rows assert on."""

    cell: Cell
    world: World
    outcome: Outcome
    kernel_pid: int
    events: list[dict[str, Any]]  # the session's event log
    leftovers: list[str]  # processes of this run still alive after it ended
    notes: dict[str, Any] = field(default_factory=dict)  # scenario-specific findings

    def __repr__(self) -> str:
        return f"<run of {self.cell.id} in {self.world.tmp}>"

    def requests(self) -> list[Any]:
        """Every model request body (Authorization headers carry the keys by design)."""
        return [r["body"] for r in self.world.jev.requests + self.world.flash.requests]


class _Slot:
    """One (scenario, cell) run: pending, then claimed by whoever runs it (the lane or a row),
    then done with its Run or the exception it raised."""

    def __init__(self) -> None:
        self.claimed = False
        self.done = threading.Event()
        self.value: Run | BaseException | None = None


_SLOTS: dict[tuple[str, Cell], _Slot] = {}
_LOCK = threading.Lock()
_LANE: dict[str, Any] = {}  # the prefetch thread and its stop flag


def _claim(key: tuple[str, Cell]) -> tuple[_Slot, bool]:
    with _LOCK:
        slot = _SLOTS.setdefault(key, _Slot())
        mine = not slot.claimed
        slot.claimed = True
        return slot, mine


def _execute(key: tuple[str, Cell], slot: _Slot) -> None:
    scenario, cell = key
    try:
        slot.value = SCENARIOS[scenario](cell)
    except BaseException as exc:  # every row of the run fails with it; none re-runs it
        slot.value = exc
    slot.done.set()


def _run_once(scenario: str, cell: Cell) -> Run:
    key = (scenario, cell)
    slot, mine = _claim(key)
    if mine:
        _execute(key, slot)
    assert slot.done.wait(RUN_TIMEOUT_S + 60), f"the {scenario} run of {cell.id} hangs"
    found = slot.value
    if isinstance(found, BaseException):
        raise AssertionError(f"the {scenario} run of {cell.id} failed: {found!r}") from found
    assert found is not None
    return found


def _cost(key: tuple[str, Cell]) -> int:
    """Longest first: a cold agent run imports OpenHands; harness runs are quick."""
    scenario, cell = key
    if cell.fe.family == "agent":
        return (0 if scenario in ("probe", "keyfile") else 1) if cell.path == "cold" else 2
    return 3


def prefetch(keys: list[tuple[str, Cell]]) -> None:
    """Run these in a background thread, longest first, while the suite runs other tests
    (they mostly wait on subprocesses): a row then finds its run done, or claims and runs
    it itself if the thread has not got to it. Called again (under pytest-xdist, at the first
    row of each scenario's group a worker gets), the new runs queue behind those already
    queued. MATRIX_PREFETCH=0 turns it off."""
    if os.environ.get("MATRIX_PREFETCH", "1") == "0" or not keys:
        return
    with _LOCK:
        queued: list[tuple[str, Cell]] = _LANE.setdefault("todo", [])
        queued += sorted(dict.fromkeys(k for k in keys if k not in queued), key=_cost)
        thread = _LANE.get("thread")
        if thread is not None and thread.is_alive() and not _LANE.get("leaving"):
            return
        stop = _LANE.setdefault("stop", threading.Event())
        _LANE["leaving"] = False
        thread = threading.Thread(target=_lane, args=(stop,), daemon=True, name="matrix-prefetch")
        _LANE["thread"] = thread
    thread.start()


def _lane(stop: threading.Event) -> None:
    """The prefetch thread: the queued runs, one at a time, until none is left. A confined
    scenario's warm pool (the probe's: a pool serves only kernels confined as it is) is
    launched first, so that its preload overlaps the cold runs."""
    warmed: set[str] = set()
    while not stop.is_set():
        with _LOCK:
            todo: list[tuple[str, Cell]] = _LANE["todo"]
            if not todo:
                _LANE["leaving"] = True
                return
            key = todo.pop(0)
            confined = [cell.spawn for name, cell in [key, *todo] if name in CONFINED]
        for path in confined:
            if path.name not in warmed:
                warmed.add(path.name)
                with contextlib.suppress(Exception):  # prepare() reports what fails
                    path.warm_up(confine([]))
        slot, mine = _claim(key)
        if mine:
            _execute(key, slot)


def close_all() -> None:
    """Stop the lane (after the run it is in) and remove every run's world."""
    if _LANE:
        _LANE.setdefault("stop", threading.Event()).set()
        thread = _LANE.get("thread")
        if thread is not None:
            thread.join(RUN_TIMEOUT_S + 60)
        _LANE.clear()
    for slot in _SLOTS.values():
        if isinstance(slot.value, Run):
            slot.value.world.close()
    _SLOTS.clear()


def events_of(world: World, session_id: str | None) -> list[dict[str, Any]]:
    """The session's event log, parsed ([] when there is none)."""
    if not session_id:
        return []
    path = world.home / session_id / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _leftovers(world: World, timeout_s: float = 15.0) -> list[str]:
    """This run's processes alive `timeout_s` after it ended (a bound on exiting, not a speed
    test), described."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = processes_of(world.home, world.tmp, world.marker)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)  # a scan reads every process's /proc entries: not at 10 Hz
    found = []
    for proc in left:
        with contextlib.suppress(psutil.Error):
            found.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
    return found


OUTSIDE = "OUTSIDE-THE-WORKSPACE-5d1f"  # the text of the file a workspace link points at


def special_files(world: World) -> dict[str, str]:
    """The probe's special files in the workspace (made on first call), name -> kind: a FIFO
    (a read once blocked forever), a character device (`mknod` as root: /dev/null's numbers,
    never /dev/zero's, which a regression would read until memory ran out), a UNIX socket, a
    block device (a loop device's numbers that no loop device has: an open of it would fail
    ENXIO, so only a refusal by type before any open names it a device) and a symbolic link
    to a file outside the workspace."""
    made = {"pipe": "fifo", "null": "device", "sock": "socket", "loop": "device"}
    made["escape"] = "symlink"
    ws = world.launch
    if not (ws / "escape").is_symlink():
        os.mkfifo(ws / "pipe")
        os.mknod(ws / "sock", 0o666 | stat.S_IFSOCK)  # what bind(2) leaves, at any path length
        with contextlib.suppress(PermissionError):  # not root: no device
            os.mknod(ws / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.mknod(ws / "loop", 0o666 | stat.S_IFBLK, os.makedev(7, 1023))
        (world.tmp / "outside.txt").write_text(OUTSIDE + "\n")
        (ws / "escape").symlink_to(world.tmp / "outside.txt")
    return {n: k for n, k in made.items() if os.path.lexists(ws / n)}


# Landlock rules of the `unseen` scenario's front end: writes only under these.
LANDLOCKED = ("/tmp", "/dev", "/proc")


def outside_target(world: World) -> str:
    """Where the `unseen` scenario's untrusted code tries to write: outside LANDLOCKED."""
    return f"/var/tmp/jmp-unseen-{world.marker}"


def _agent_task(world: World, scenario: str) -> dict[str, Any]:
    keys = " ".join(world.keys.values())
    if scenario == "unseen":  # one write outside the Landlock rules; its error kept
        world.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
        err, code = world.out / "unseen.err", world.out / "unseen.rc"
        command = f"(echo escaped > {outside_target(world)}) 2> {err}; echo $? > {code}"
        world.flash.queue([{"tool_call": {"arguments": {"command": command}}}, {"text": "Tried."}])
        return {"prompt": "write the file"}
    if scenario == "powercut":  # a quick call the client hears of, then one that blocks
        world.jev.script([{"route": "bash"}, {"route": "bash"}])
        first, second = f"echo one >> {world.effect}", f"echo two >> {world.effect}; {SLEEP}"
        world.flash.queue([{"tool_call": {"arguments": {"command": c}}} for c in (first, second)])
        return {"prompt": "run both jobs"}
    if scenario == "probe":  # first `read` of each special file, then the probe in the shell
        reads = [{"tool_call": {"arguments": {"path": name}}} for name in special_files(world)]
        world.jev.script(
            [{"route": "read"}] * len(reads)
            + [{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}]
        )
        answer = f"Looked around. keys: {keys} {ESCAPES} done"
        probe = {"tool_call": {"arguments": {"command": world.probe_command()}}}
        world.flash.queue([*reads, probe, {"text": answer}])
        return {"prompt": f"look around; my keys are {keys}"}
    world.jev.script([{"route": "bash"}])
    # long enough to be sourced from a file the tool worker writes under terminal/commands/
    command = f"echo ran >> {world.effect}; {SLEEP} # {'long ' * 900}"
    world.flash.queue([{"tool_call": {"arguments": {"command": command}}}])
    return {"prompt": "run the slow job"}


def _harness_task(world: World, scenario: str) -> dict[str, Any]:
    keys = " ".join(world.keys.values())
    if scenario == "probe":
        world.jev.script([{"probe.look.how": "quick"}])
        inputs = {"mode": "look", "probe": str(PROBE), "out": str(world.out)}
        inputs |= {"env_file": str(world.env_file)}
        inputs |= {"marker": world.marker, "note": f"an input holding {keys}"}
        context = {"keys": list(world.keys.values()), "note": f"the context holds {keys}"}
        return {"goal": f"look around; my keys are {keys}", "inputs": inputs, "context": context}
    if scenario == "unseen":
        world.jev.script([{"probe.write.how": "quick"}])
        inputs = {"mode": "write", "target": outside_target(world), "out": str(world.out)}
        return {"goal": "write the file", "inputs": inputs}
    if scenario == "powercut":
        world.jev.script([{"probe.touch.how": "quick"}])
        inputs = {"mode": "touch", "effect": str(world.effect), "out": str(world.out)}
        return {"goal": "touch the file", "inputs": inputs}
    hold = world.tmp / "hold"
    os.mkfifo(hold)
    world.jev.script([{"probe.hold.how": "quick"}])
    inputs = {"mode": "hold", "hold": str(hold), "effect": str(world.effect)}
    if missing_browser() is None:  # the script holds a real browser open when it is killed
        inputs["browser"] = str(world.tmp / "browser.json")
    return {"goal": "run the slow job", "inputs": inputs | {"out": str(world.out)}}


def _task(world: World, cell: Cell, scenario: str) -> dict[str, Any]:
    if cell.fe.family == "agent":
        return _agent_task(world, scenario)
    return _harness_task(world, scenario)


def _probe(cell: Cell) -> Run:
    cell.spawn.prepare(confine([]))
    world = World(cell.spawn, confined=True, hostile=True)
    try:
        running = cell.fe.start(world, _task(world, cell, "probe"))
        kernel = running.kernel_pid()
        outcome = running.wait(RUN_TIMEOUT_S)
        events = events_of(world, outcome.session_id)
        return Run(cell, world, outcome, kernel, events, _leftovers(world))
    except BaseException:
        world.close()
        raise


def probe(cell: Cell) -> Run:
    return _run_once("probe", cell)


def _keyfile(cell: Cell) -> Run:
    """The probe run, but the model keys are in the key file alone (`jmp --setup`'s, 0600 in
    a 0700 dir; no key variable but the Camofox one), and the untrusted code prints that file's
    keys encoded (the owner's shell can read the owner's file: the redactor must know them)."""
    cell.spawn.prepare(confine([]))
    world = World(cell.spawn, confined=True, hostile=False, key_file=True)
    try:
        running = cell.fe.start(world, _task(world, cell, "probe"))
        kernel = running.kernel_pid()
        outcome = running.wait(RUN_TIMEOUT_S)
        events = events_of(world, outcome.session_id)
        return Run(cell, world, outcome, kernel, events, _leftovers(world))
    except BaseException:
        world.close()
        raise


def keyfile(cell: Cell) -> Run:
    return _run_once("keyfile", cell)


def _crash(cell: Cell) -> Run:
    cell.spawn.prepare()
    world = World(cell.spawn, confined=False, hostile=False, umask=0)
    try:
        running = cell.fe.start(world, _task(world, cell, "crash"))
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not world.effect.exists():  # the untrusted code ran: the call is in flight
            assert running.running(), f"ended before the call: {running.wait(0)}"
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
        kernel = running.kernel_pid()
        kind = "tool" if cell.fe.family == "agent" else "harness"
        (victim,) = workers_of(kernel, kind)
        parent = cell.spawn.parent_kind(victim.parent(), kernel)
        victim.send_signal(signal.SIGKILL)
        outcome = running.wait(RUN_TIMEOUT_S)
        notes = {"worker_parent": parent, "victim": victim.pid}
        if cell.fe.family == "harness":
            with contextlib.suppress(OSError):  # unblock nothing: the reader is dead
                os.unlink(world.tmp / "hold")
        events = events_of(world, outcome.session_id)
        return Run(cell, world, outcome, kernel, events, _leftovers(world), notes)
    except BaseException:
        world.close()
        raise


def crash(cell: Cell) -> Run:
    return _run_once("crash", cell)


def _unseen(cell: Cell) -> Run:
    """The front end in a Landlock domain of its own (writes only under LANDLOCKED; as root
    no other confinement is added, so its view equals an unconfined pool's), with the suite's
    unconfined pool answering on the warm path (a user's earlier run started it); the
    untrusted code tries to write outside the rules. Needs Landlock (`landlock.available()`)."""
    from tests.support import landlock

    reason = landlock.available()
    assert not reason, reason
    cell.spawn.prepare()
    # by its file: the front end starts in the launch dir, where `tests` is not importable
    wrapper = (sys.executable, landlock.__file__, "--write", ",".join(LANDLOCKED))
    world = World(cell.spawn, confined=False, hostile=False, wrapper=(*wrapper, "--"))
    try:
        running = cell.fe.start(world, _task(world, cell, "unseen"))
        kernel = running.kernel_pid()
        outcome = running.wait(RUN_TIMEOUT_S)
        events = events_of(world, outcome.session_id)
        target = outside_target(world)
        notes = {"escaped": os.path.exists(target)}
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        return Run(cell, world, outcome, kernel, events, _leftovers(world), notes)
    except BaseException:
        world.close()
        raise


def unseen(cell: Cell) -> Run:
    return _run_once("unseen", cell)


def _only_session(world: World) -> str | None:
    found = [p.name for p in world.home.iterdir() if p.is_dir()] if world.home.exists() else []
    return found[0] if len(found) == 1 else None


def _kernel_kill(cell: Cell) -> Run:
    """As `crash`, but the process running the kernel (the front end's own) is killed, mid-call,
    with SIGKILL alone: its workers, their shells and MCP servers must notice and exit."""
    cell.spawn.prepare()
    world = World(cell.spawn, confined=False, hostile=False)
    try:
        running = cell.fe.start(world, _task(world, cell, "crash"))
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not world.effect.exists():
            assert running.running(), f"ended before the call: {running.wait(0)}"
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
        kernel = running.kernel_pid()
        workers = workers_of(kernel)
        parents = {w.pid: cell.spawn.parent_kind(w.parent(), kernel) for w in workers}
        os.kill(kernel, signal.SIGKILL)
        notes: dict[str, Any] = {"worker_parents": parents}
        try:
            outcome = running.wait(RUN_TIMEOUT_S)
        except BaseException as exc:  # a client may complain about its dead server: expected
            notes["client_error"] = repr(exc)
            outcome = Outcome(None, "", "", None, None, False)
        outcome.session_id = outcome.session_id or _only_session(world)
        events = events_of(world, outcome.session_id)
        return Run(cell, world, outcome, kernel, events, _leftovers(world), notes)
    except BaseException:
        world.close()
        raise


def kernel_kill(cell: Cell) -> Run:
    return _run_once("kernel_kill", cell)


def told_of_a_result(item: Any) -> bool:
    """Has the client been told of a finished call (or, over MCP, of the run's result)?"""
    if isinstance(item, dict) and item.get("kind") == "tool_finished":
        return True  # a JSON line: jmp --json, jev-harness --json, the Python APIs
    update = item.get("params", {}).get("update", {}) if isinstance(item, dict) else {}
    if update.get("sessionUpdate") == "tool_call_update":  # an ACP frame
        return update.get("status") in ("completed", "failed")
    return getattr(item, "structuredContent", None) is not None  # an MCP result


def _powercut(cell: Cell) -> Run:
    """The sessions dir on the power-cut simulator (strict POSIX; everything unsynced lost);
    the power is cut as soon as the client has been told of a finished call (agent: the
    first of two, so the next route is in flight; harness: its one operation; MCP: the
    result). Every process of the run is killed, the disk goes back to its durable image, and
    `world.home` is that image."""
    from jmp_lab.chaos.powercut.control import LossyDisk, available

    reason = available()
    assert reason is None, f"power cuts need FUSE: {reason}"
    cell.spawn.prepare()
    world = World(cell.spawn, confined=False, hostile=False)
    disk = LossyDisk(world.tmp / "backing", world.tmp / "mnt", "strict", world.tmp / "disk")
    try:
        disk.start()
        world.home = disk.mount / "sessions"
        running = cell.fe.start(world, _task(world, cell, "powercut"))
        kernel = running.kernel_pid()
        try:
            running.wait_heard(told_of_a_result, RUN_TIMEOUT_S)
        finally:
            disk.freeze()  # every operation on the disk waits from here on
            assert disk.process is not None
            for proc in processes_of(world.home, world.tmp, world.marker):
                if proc.pid != disk.process.pid:
                    with contextlib.suppress(psutil.Error):
                        proc.kill()  # each dies once the cut answers what it waits for
            cut = disk.cut("lose", "lose", seed=len(cell.id))
        notes: dict[str, Any] = {"cut": cut}
        try:
            outcome = running.wait(RUN_TIMEOUT_S)
        except BaseException as exc:  # a client whose server died mid-call may complain
            notes["client_error"] = repr(exc)
            outcome = Outcome(None, "", "", None, None, False)
        notes["heard"] = running.heard  # all of it came before the cut: the disk was frozen
        world.home = disk.backing / "sessions"
        outcome.session_id = outcome.session_id or _only_session(world)
        events = events_of(world, outcome.session_id)
        return Run(cell, world, outcome, kernel, events, _leftovers(world), notes)
    except BaseException:
        disk.kill()
        world.close()
        raise


def powercut(cell: Cell) -> Run:
    return _run_once("powercut", cell)


SCENARIOS: dict[str, Callable[[Cell], Run]] = {
    "probe": _probe,
    "keyfile": _keyfile,
    "crash": _crash,
    "kernel_kill": _kernel_kill,
    "powercut": _powercut,
    "unseen": _unseen,
}
assert tuple(SCENARIOS) == SCENARIO_NAMES, "groups.py schedules the scenarios by these names"
CONFINED = {"probe"}  # the scenarios whose front end runs confined (World(confined=True))
