"""Resource limits on task scripts, set on the process that runs one (issue 32 item 5).

Both places where a script's code runs set them on themselves before the script's first byte
runs: the check-task probe (jev_harness/check.py) and the harness worker at `LoadTask`
(workers/harness), on either spawn path (a cold spawn and a warm pool's fork load the task the
same way). The values come parsed (protocol/limits.py, JEV_HARNESS_*). They are rlimits, so
they hold for the process and every process it starts:

- memory: RLIMIT_DATA (the heap and every private writable mapping) at what the process holds
  now plus JEV_HARNESS_MEMORY_MB, so the script's share is the same on both spawn paths.
  RLIMIT_DATA does not count shared mappings (`mmap.mmap(-1, N)` is shared anonymous memory:
  300 MB was touched under a 64 MB limit), so an audit hook counts every anonymous
  `mmap.mmap` against the same budget (the private memory and the shared writable mappings
  added since the limits were set, plus the new one: over it, MemoryError), and RLIMIT_AS
  bounds all the rest (shared memory from native code or /dev/shm, file mappings) at the
  address space mapped now plus the budget plus AS_HEADROOM_MB, which is for what the
  process maps beyond its data: libraries imported later, guard pages, the address space a
  thread's malloc arena reserves (glibc's arenas are capped at MALLOC_ARENAS, so that a
  script's threads do not each reserve 64 MiB of it);
- file size: RLIMIT_FSIZE; SIGXFSZ is ignored (Python ignores it at start-up, and the probe
  says so again), so that a write past it fails (EFBIG) instead of killing the process;
- CPU: a watchdog thread raises `CpuLimitExceeded` in the script's thread once the process has
  used its CPU budget since the limits were set (the deadline + 5 s, or JEV_HARNESS_CPU_S);
  RLIMIT_CPU, HARD_GRACE_S later, kills a script stuck in C code where no exception lands.
  It fires once, and only while `busy` (a request being answered); an exception that lands
  just as that request ends is answered as an internal error of that request, and the next
  one meets RLIMIT_CPU;
- processes: RLIMIT_NPROC counts every process and thread of the real uid (in its user
  namespace), not of this process, so it is set to the uid's current count plus
  JEV_HARNESS_MAX_PROCESSES. The kernel exempts root (and CAP_SYS_RESOURCE / CAP_SYS_ADMIN)
  from it: as root no process limit applies to `run`, while check-task's confined probe
  refuses every new process by seccomp, whoever runs it (jev_harness/sandbox.py).

Hard or soft (`apply(..., hard=)`): check-task's probe, which starts no process, lowers the
hard limits too. The harness worker lowers only the soft limits of memory, address space,
file size and processes (the hard ones stay the user's): the browser a run's ChromiumProvider
starts (Playwright's driver, then Chromium) is jmp's machinery, bounded by its fetch deadline
and size bounds, and would inherit the script's rlimits — its driver dies under 400 MiB of
RLIMIT_DATA and Chromium's renderer came close to 1 GiB — so its launcher raises its soft
limits back to the hard ones (jev_harness/web/browser.py). In the worker an audit hook then refuses
`resource.setrlimit` and `resource.prlimit` with new limits: a script cannot lift its own from
Python; native code or a child shell could lift soft limits up to the hard ones, so in `run`
these limits stop a runaway script, not a hostile one (docs/JEV-HARNESS.md). The CPU limit is
hard in both.

`named(exc)` says which limit an exception means, so that a script that hits one ends with an
error that names it, not a bare MemoryError.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import sys
import threading
import time

from protocol.limits import ScriptLimits

HARD_GRACE_S = 5  # CPU seconds past the budget before RLIMIT_CPU's SIGXCPU ends the process
WATCH_INTERVAL_S = 0.2
MIB = 1024 * 1024
AS_HEADROOM_MB = 256  # address space past the memory budget (see the module docstring)
MALLOC_ARENAS = 2  # glibc's M_ARENA_MAX under the limits
M_ARENA_MAX = -8
_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc  # resolved before any guard
_applied: list[tuple[ScriptLimits, int, bool]] = []  # in force here: limits, CPU budget, NPROC set
_memory_base: list[int] = []  # private and shared writable bytes when the limits were set
watchdog_ident: list[int] = []  # the watchdog thread's ident (check.py's audit hook knows it)
busy = threading.Event()  # set while the target thread runs the script's code (or may)


class CpuLimitExceeded(Exception):
    """The script used its CPU time budget."""


def apply(
    limits: ScriptLimits, deadline_s: float, target: threading.Thread, *, hard: bool = True
) -> None:
    """Set the limits on this process (an rlimit is only ever lowered; with `hard` False only
    the soft limits of memory, file size and processes, and no script may change them after);
    the CPU watchdog raises CpuLimitExceeded in `target`, the thread that runs the script,
    while `busy` is set (the caller sets it around the script's code)."""
    budget = limits.cpu_budget(deadline_s)
    _applied[:] = [(limits, budget, os.getuid() != 0)]
    keep = not hard
    budget_bytes = limits.memory_mb * MIB
    data, shared = _memory_now()
    _memory_base[:] = [data + shared]
    _lower(resource.RLIMIT_DATA, data + budget_bytes, keep_hard=keep)
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    _lower(resource.RLIMIT_FSIZE, limits.file_mb * MIB, keep_hard=keep)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    used = time.process_time()
    cpu = int(used) + budget + HARD_GRACE_S
    _lower(resource.RLIMIT_CPU, cpu, cpu + HARD_GRACE_S)
    watch = threading.Thread(
        target=_watch, args=(used + budget, target), daemon=True, name="cpu-limit"
    )
    watch.start()
    # after the watchdog has its stack: the address space counted from here
    space = _status_kib("VmSize") * 1024
    _lower(resource.RLIMIT_AS, space + budget_bytes + AS_HEADROOM_MB * MIB, keep_hard=keep)
    sys.addaudithook(_budget_mmap)
    if os.getuid() != 0:  # root is exempt from RLIMIT_NPROC (see the module docstring)
        _lower(resource.RLIMIT_NPROC, _tasks_of(os.getuid()) + limits.max_processes, keep_hard=keep)
    if keep:
        sys.addaudithook(_refuse_new_limits)


def _budget_mmap(event: str, args: tuple[object, ...]) -> None:
    """Audit hook: an anonymous `mmap.mmap` (fd -1: shared, or private with ACCESS_COPY) that
    would take the memory the script added past its budget is refused with MemoryError."""
    if event != "mmap.__new__" or args[:1] != (-1,) or not _applied or not _memory_base:
        return
    length = args[1]
    if not isinstance(length, int):
        return
    data, shared = _memory_now()
    added = data + shared - _memory_base[0]
    if added + length > _applied[0][0].memory_mb * MIB:
        raise MemoryError(f"mmap of {length} bytes: past the task script's memory budget")


def _refuse_new_limits(event: str, args: tuple[object, ...]) -> None:
    """Audit hook: no new rlimit from Python code once the soft limits are set."""
    if event == "resource.setrlimit" or (event == "resource.prlimit" and args[2:3] != (None,)):
        raise PermissionError(f"{event}: the task script's limits are fixed for the run")


def _watch(until: float, target: threading.Thread) -> None:
    """Past the budget, raise CpuLimitExceeded in `target` once, while it is `busy` (a
    worker's job thread between two requests runs none of the script's code)."""
    watchdog_ident[:] = [threading.get_ident()]
    while time.process_time() < until or not busy.is_set():
        time.sleep(WATCH_INTERVAL_S)
    ident = target.ident
    if ident is not None and target.is_alive():  # raised there at its next bytecode
        _set_async_exc(ctypes.c_ulong(ident), ctypes.py_object(CpuLimitExceeded))


def _lower(which: int, soft: int, hard: int | None = None, keep_hard: bool = False) -> None:
    cur_soft, cur_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if keep_hard:
        hard = cur_hard
    elif cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    if cur_soft != resource.RLIM_INFINITY:
        soft = min(soft, cur_soft)
    resource.setrlimit(which, (soft, hard))


def _status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmData, VmSize), or 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _memory_now() -> tuple[int, int]:
    """What the memory budget counts of this process now, in bytes: its private writable
    memory (VmData, what RLIMIT_DATA counts) and its shared writable mappings (anonymous
    ones, SysV and /dev/shm segments, shared file mappings: /proc/self/maps). The budget is on
    top of what they are when the limits are set, so that it is the same in a cold worker
    (about 45 MB of VmData) and in one forked by the warm pool (about 285 MB, the pool's
    preloaded modules)."""
    shared = 0
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                span, perms = line.split(None, 2)[:2]
                if perms[1] == "w" and perms[3] == "s":
                    start, _, end = span.partition("-")
                    shared += int(end, 16) - int(start, 16)
    except (OSError, ValueError, IndexError):
        pass
    return _status_kib("VmData") * 1024, shared


def _tasks_of(uid: int) -> int:
    """The processes and threads whose real uid is `uid` that this /proc shows (what
    RLIMIT_NPROC counts; /proc/PID/status, which a non-dumpable process's owner field would
    hide, is readable for all)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="utf-8", errors="replace") as f:
                fields = dict(line.partition(":")[::2] for line in f.read().splitlines())
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields.get("Threads", "1").strip() or 1)
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return count


def named(exc: BaseException) -> str:
    """Which limit `exc` (or an exception it came from) means, or "" for none (and always ""
    where no limit was set)."""
    if not _applied:
        return ""
    limits, budget, nproc = _applied[0]
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        enomem = isinstance(found, OSError) and found.errno == errno.ENOMEM  # mmap, past it
        if isinstance(found, MemoryError) or enomem:
            return f"the memory limit (JEV_HARNESS_MEMORY_MB={limits.memory_mb})"
        if isinstance(found, CpuLimitExceeded):
            return f"the CPU time limit ({budget} s of CPU; JEV_HARNESS_CPU_S)"
        if isinstance(found, OSError) and found.errno == errno.EFBIG:
            return f"the file size limit (JEV_HARNESS_FILE_MB={limits.file_mb})"
        spawn = isinstance(found, OSError) and found.errno == errno.EAGAIN  # fork, clone
        thread = isinstance(found, RuntimeError) and "new thread" in str(found)
        if nproc and (spawn or thread):  # (root: no RLIMIT_NPROC, so no EAGAIN of it)
            return f"the process limit (JEV_HARNESS_MAX_PROCESSES={limits.max_processes})"
        found = found.__cause__ or found.__context__
    return ""
