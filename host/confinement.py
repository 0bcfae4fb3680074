"""The confinement view: what a process's children inherit and can never widen again.

Credentials, capability sets, no_new_privs, seccomp, the LSM label, securebits, the root
directory (chroot) and the namespaces; a Landlock domain, which nothing shows, is told by
probes instead (`host/landlock.py`). A warm
pool serves only kernels whose view equals its own (a fork would otherwise run with the pool's
privileges instead of its kernel's) and lives in a directory named after it (`view_key`), so
the pool a confined kernel starts (confined alike) serves that kernel's later runs. Kernel and
pool read it the same way, from /proc: like `host/pool.py: code_fingerprint`, the reading
lives here so that both sides compute it identically.
"""

from __future__ import annotations

import os

# /proc/PID/status lines a child inherits and can never widen again: a worker forked by a pool
# with other values would run with the pool's privileges instead of its kernel's.
CONFINEMENT_FIELDS = (
    "Uid",
    "Gid",
    "Groups",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
    "Seccomp_filters",
)
# The namespaces a child lands in: a process's own, but pid and time children get the
# *_for_children ones (equal to its own unless it unshared them).
NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid_for_children", "time_for_children", "user", "uts")


def confinement(pid: int | str = "self") -> dict[str, str]:
    """The credentials and confinement of process `pid` that its children inherit: the
    `CONFINEMENT_FIELDS` of /proc/PID/status (readable for any process of ours, dumpable or
    not) and its LSM label. A missing field reads "-". Raises OSError when `pid` is gone."""
    view = dict.fromkeys(CONFINEMENT_FIELDS, "-")
    with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in view:
                view[name] = " ".join(value.split())
    try:
        with open(f"/proc/{pid}/attr/current", "rb") as label:
            view["lsm"] = label.read().rstrip(b"\0\n").decode("utf-8", "replace") or "-"
    except OSError:  # no LSM that keeps labels (EINVAL), or none readable
        view["lsm"] = "-"
    return view


# Securebits a process can only read of itself (prctl): SECBIT_NOROOT makes root's exec'd
# children capability-less, so a fork of a pool without it would keep every capability a cold
# worker loses. SECBIT_KEEP_CAPS (bit 4) is cleared by every execve: no exec'd worker, pool or
# cold, has it, so it is left out (its lock bit is not).
PR_GET_SECUREBITS = 27
SECBIT_KEEP_CAPS = 1 << 4


def securebits() -> int:
    """This process's securebits (lock bits included, SECBIT_KEEP_CAPS left out); -1 where
    prctl cannot be called."""
    import ctypes

    try:
        value = int(ctypes.CDLL(None, use_errno=True).prctl(PR_GET_SECUREBITS, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return -1
    return value & ~SECBIT_KEEP_CAPS if value >= 0 else -1


def root_of(pid: int | str = "self") -> str:
    """The identity (st_dev:st_ino) of process `pid`'s root directory (chroot), read through
    /proc/PID/root: ptrace access to `pid` is needed (PermissionError otherwise)."""
    st = os.stat(f"/proc/{pid}/root")
    return f"{st.st_dev}:{st.st_ino}"


def own_view() -> dict[str, str]:
    """This process's whole view: `confinement()`, its securebits and its root directory."""
    return confinement() | {"securebits": str(securebits()), "root": root_of()}


def namespaces(pid: int | str = "self") -> dict[str, str]:
    """The `NAMESPACES` of process `pid` that exist here, as their link text (`net:[4026...]`).
    Reading another process's needs ptrace access (a non-dumpable one refuses its own user):
    raises PermissionError then."""
    found = {}
    for name in NAMESPACES:
        try:
            found[name] = os.readlink(f"/proc/{pid}/ns/{name}")
        except FileNotFoundError:  # a namespace type this kernel does not have
            continue
    return found


def view_key(view: dict[str, str], spaces: dict[str, str]) -> str:
    """A short name for a confinement view: the pool serving it lives in DIR/KEY."""
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256
    text = "\0".join(f"{k}={v}" for k, v in sorted({**view, **spaces}.items()))
    return "v" + str(sha256(text.encode()).hexdigest())[:15]


def own_view_key() -> str:
    """This process's `view_key`, read now (a few /proc reads): a process's view can change
    under it (a library that drops capabilities or sets no_new_privs in it), and a key kept
    from before would send its kernels to another view's pool, which refuses them."""
    return view_key(own_view(), namespaces())
