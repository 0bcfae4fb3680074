"""What a worker forked by the warm pool takes on from its kernel before it becomes the worker.

A cold child inherits its kernel's cgroup, resource limits, umask, priority and CPU set; a fork
has the pool's. These a process may set for itself, so the fork sets them (`take_on`) from what
the pool read of the kernel (`read_kernel`) before the pool answers `Spawned`; what it cannot
set (credentials, capabilities, no_new_privs, seccomp, namespaces) the pool has matched
instead (`host/confinement.py`). A failure is named (`TakeOnError`) and the pool refuses,
so the kernel spawns cold.
"""

from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass

# A worker gets its kernel's limits, never the pool's: the pool was launched by some earlier
# kernel, perhaps under a file-size limit (found by the chaos runner: every later worker then
# failed its writes with EFBIG). Every limit the platform has.
LIMITS = {getattr(resource, name): name for name in dir(resource) if name.startswith("RLIMIT_")}


class TakeOnError(Exception):
    """A forked worker cannot take on one of its kernel's settings (the pool refuses then)."""


@dataclass(frozen=True)
class Kernel:
    """What a forked worker takes on from its kernel before it becomes the worker: what a cold
    child would have inherited, read by the pool from the kernel's /proc entry."""

    limits: dict[int, tuple[int, int]]
    umask: int
    nice: int
    cpus: frozenset[int]
    cgroups: tuple[str, ...]  # the lines of /proc/PID/cgroup


def read_kernel(pid: int) -> Kernel | None:
    """The settings of process `pid` a forked worker must take on; None when unreadable."""
    try:
        limits = {res: resource.prlimit(pid, res) for res in LIMITS}
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
        nice = os.getpriority(os.PRIO_PROCESS, pid)
        cpus = frozenset(os.sched_getaffinity(pid))
        cgroups = _cgroups(pid)
    except (OSError, ValueError, StopIteration, IndexError):
        return None
    return Kernel(limits, umask, nice, cpus, cgroups)


def take_on(kernel: Kernel) -> None:
    """In the forked child: become what a cold child of that kernel would be in its cgroup,
    umask, priority, CPU set and resource limits. Raises TakeOnError naming what failed (a hard
    limit above the pool's needs CAP_SYS_RESOURCE, a lower nice CAP_SYS_NICE, a cgroup move
    write access to it)."""
    _move_cgroups(kernel.cgroups)
    os.umask(kernel.umask)
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) != kernel.nice:
            os.setpriority(os.PRIO_PROCESS, 0, kernel.nice)
    except OSError as exc:
        raise TakeOnError(f"priority (nice {kernel.nice}): {exc.strerror}") from exc
    try:
        if frozenset(os.sched_getaffinity(0)) != kernel.cpus:
            os.sched_setaffinity(0, kernel.cpus)
    except OSError as exc:
        raise TakeOnError(f"CPU set {sorted(kernel.cpus)}: {exc.strerror}") from exc
    for res, value in kernel.limits.items():
        try:
            resource.setrlimit(res, value)
        except (OSError, ValueError) as exc:
            raise TakeOnError(f"{LIMITS[res]} {value}: {exc}") from exc


def _cgroups(pid: int | str) -> tuple[str, ...]:
    with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="surrogateescape") as f:
        return tuple(line.rstrip("\n") for line in f if line.strip())


def _move_cgroups(wanted: tuple[str, ...]) -> None:
    """Join the kernel's cgroup in every hierarchy where ours differs (v1 and v2 alike)."""
    own = _cgroups("self")
    if own == wanted:
        return
    hierarchies = {line.rsplit(":", 1)[0] for line in own}
    if hierarchies != {line.rsplit(":", 1)[0] for line in wanted}:
        raise TakeOnError("the kernel's cgroup hierarchies are not the pool's")
    for line in sorted(set(wanted) - set(own)):
        _hid, controllers, path = line.split(":", 2)
        mount = _cgroup_mount(controllers)
        if mount is None:
            raise TakeOnError(f"cgroup {controllers or 'v2'} {path}: no mount of it here")
        point, root = mount
        base = root.rstrip("/")
        if path != root and not path.startswith(base + "/"):
            raise TakeOnError(f"cgroup {controllers or 'v2'} {path}: outside the mount")
        try:
            with open(f"{point}{path[len(base) :]}/cgroup.procs", "w", encoding="ascii") as f:
                f.write("0")
        except OSError as exc:
            raise TakeOnError(f"cgroup {controllers or 'v2'} {path}: {exc.strerror}") from exc


def _cgroup_mount(controllers: str) -> tuple[str, str] | None:
    """(mount point, root within the hierarchy) of the hierarchy with these controllers
    ("" is cgroup v2), from our own mountinfo (the kernel's: the mount namespace matches)."""
    wanted = set(filter(None, controllers.split(",")))
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], set(fields[sep + 3].split(","))
            if (not wanted and fstype == "cgroup2") or (
                wanted and fstype == "cgroup" and wanted <= options
            ):
                return _unescape(fields[4]), _unescape(fields[3])
    return None


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
