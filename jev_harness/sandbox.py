"""The check-task probe's OS confinement: namespaces, a read-only view, no sockets, no way back.

`confine(view)` turns the calling process (a fresh fork, single-threaded) into the init of new
user, mount, network, IPC, UTS and PID namespaces whose whole filesystem is a read-only view
of the paths in `view` (and what Python needs: its prefixes, sys.path, /usr, /etc, ...):

- user namespace: its uid and gid map to ours (no other id exists there);
- mount namespace: a fresh tmpfs root holding read-only, nosuid, nodev bind mounts of the view,
  a fresh /proc of the new PID namespace, /dev with null, zero, full, random and urandom only,
  an empty /tmp; the old root is detached (pivot_root), so nothing else can be reached, and no
  file can be created, written, removed or renamed anywhere (EROFS);
- network namespace: only a loopback that is down; IPC: no SysV object of the host;
- PID namespace: every process the script starts lives in it and dies with its init, which
  is the probe; no process outside it can be seen or signalled;
- then every capability is dropped (bounding set, securebits locked, no_new_privs), so an
  exec'd program regains none, and a seccomp filter refuses socket(2) and io_uring_setup(2)
  (a Unix socket of the view, such as a warm pool's, must not be reachable either), every new
  process (threads are allowed: check-task is static, and RLIMIT_NPROC does not bind root)
  and the clearing of the init's parent-death signal (how the probe's deadline ends it all).

It raises `Unconfined(reason)` when the machine does not allow it (no user namespaces, an
older kernel, another architecture): before anything irreversible when it can, else the caller
must not go on in this process (see jev_harness/check.py). Linux only; ctypes over libc.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import struct
import sys
from collections.abc import Iterable
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
MNT_DETACH = 2
AT_FDCWD, AT_RECURSIVE, AT_EMPTY_PATH = -100, 0x8000, 0x1000
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 1, 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 1, 24, 28, 38
PR_CAPBSET_READ = 23
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECBITS_LOCKED_ALL = 0x3F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and their locks
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM, EACCES, ENOSYS = 1, 13, 38
CLONE_THREAD = 0x00010000

# Per architecture: audit arch, and the numbers of pivot_root, capset, socket, prctl (those of
# io_uring_setup, open_tree, move_mount and mount_setattr are the same on both).
_ARCH = {
    "x86_64": (0xC000003E, 155, 126, 41, 157),
    "aarch64": (0xC00000B7, 41, 91, 198, 167),
}
NR_IO_URING_SETUP, NR_OPEN_TREE, NR_MOVE_MOUNT, NR_MOUNT_SETATTR = 425, 428, 429, 442
NR_CLONE3 = 435
# clone, fork, vfork (aarch64 has no fork nor vfork: a number no call has)
_PROCESS_CALLS = {"x86_64": (56, 57, 58), "aarch64": (220, 0xFFFFFFFF, 0xFFFFFFFF)}
_X32_BIT = 0x40000000  # x86_64: the x32 ABI's numbers, another way to every syscall
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
NEW_ROOT = "/tmp"  # mounted over, in our own mount namespace only: the view is built there


class Unconfined(RuntimeError):
    """The OS confinement is unavailable here; the message says why."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise Unconfined(f"{what}: {os.strerror(err)}")
    return result


def _syscall(nr: int, *args: int | bytes, what: str) -> int:
    """syscall(2): integers passed as longs (the variadic call must fill whole registers)."""
    _libc.syscall.restype = ctypes.c_long
    values = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return _check(int(_libc.syscall(ctypes.c_long(nr), *values)), what)


def _machine() -> str:
    return os.uname().machine if sys.platform == "linux" else sys.platform


def arch() -> tuple[int, int, int, int, int]:
    found = _ARCH.get(_machine())
    if found is None:
        raise Unconfined(f"no confinement for {sys.platform}/{_machine()}")
    return found


def enter_namespaces() -> None:
    """unshare(2) into new user, mount, network, IPC, UTS and PID namespaces, our ids mapped.
    The caller's next fork becomes the new PID namespace's init. Nothing is changed when the
    unshare itself is refused."""
    arch()
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID
    try:
        os.unshare(flags)
    except OSError as exc:
        raise Unconfined(f"user namespaces are unavailable: {exc.strerror}") from exc
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as exc:
        raise Unconfined(f"the user namespace's id maps: {exc.strerror}") from exc


def confine(view: Iterable[str], workdir: str) -> None:
    """In the PID namespace's init (after `enter_namespaces` and a fork): build the read-only
    view, pivot into it, enter `workdir`, drop every capability, arm the seccomp filter."""
    _, nr_pivot, nr_capset, nr_socket, nr_prctl = arch()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # our parent gone: all of us go
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    sources = _sources(view)
    # Copies of every tree, taken before the new root covers NEW_ROOT (a source may be under it).
    mounts = {path: (_clone(path, AT_RECURSIVE), os.path.isdir(path)) for path in sources}
    for name in DEVICES:
        with contextlib.suppress(Unconfined):
            mounts[f"/dev/{name}"] = (_clone(f"/dev/{name}", 0), False)
    links = [(link, to) for link, to in _links(view) if not any(_inside(link, p) for p in sources)]
    root = NEW_ROOT
    _check(
        _libc.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755"), "tmpfs"
    )
    for path, (fd, is_dir) in sorted(mounts.items()):
        _attach(fd, root + path, is_dir)
    for link, value in links:
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(root + link), exist_ok=True)
            os.symlink(value, root + link)
    for name in ("proc", "tmp"):
        os.makedirs(f"{root}/{name}", exist_ok=True)
    # A host whose /proc is partly covered refuses a fresh one: the view has none then.
    proc_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _libc.mount(b"proc", f"{root}/proc".encode(), b"proc", proc_flags, None)
    # Not nodev: /dev/null and the other binds must stay usable (no other device is in view).
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    _syscall(
        NR_MOUNT_SETATTR,
        AT_FDCWD,
        root.encode(),
        AT_RECURSIVE,
        attr,
        len(attr),
        what="making the view read-only",
    )
    os.chdir(root)
    _syscall(nr_pivot, b".", b".", what="pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detaching the old root")
    os.chdir("/")
    with contextlib.suppress(OSError):
        os.chdir(workdir)
    _drop_capabilities(last_cap, nr_capset)
    _filter_syscalls(nr_socket, nr_prctl)


def _clone(path: str, recursive: int) -> int:
    """A detached copy of the mount tree at `path` (open_tree(2)), as an fd."""
    flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | recursive
    return _syscall(NR_OPEN_TREE, AT_FDCWD, path.encode(), flags, what=f"copying {path}")


def _attach(fd: int, target: str, is_dir: bool) -> None:
    """Mount the detached tree `fd` at `target` in the new root, made for it."""
    if is_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        Path(target).touch()
    flags = MOVE_MOUNT_F_EMPTY_PATH
    _syscall(NR_MOVE_MOUNT, fd, b"", AT_FDCWD, target.encode(), flags, what=f"mounting {target}")
    os.close(fd)


def _sources(view: Iterable[str]) -> list[str]:
    """What to bind: the real paths of the view, Python's prefixes and sys.path, the system
    dirs; none inside another, none under /proc, /sys or /dev."""
    wanted = {*view, *SYSTEM_DIRS, sys.prefix, sys.base_prefix, sys.exec_prefix}
    wanted |= {sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    wanted |= {p for p in sys.path if p}
    real = set()
    for path in wanted:
        resolved = os.path.realpath(path)
        if os.path.exists(resolved) and not resolved.startswith(("/proc", "/sys", "/dev")):
            real.add(resolved)
    real.discard("/")  # (a probe run from /: its relative paths name nothing then)
    kept: list[str] = []
    for path in sorted(real, key=lambda p: (p.count("/"), p)):
        if not any(_inside(path, k) for k in kept):
            kept.append(path)
    return kept


def _links(view: Iterable[str]) -> list[tuple[str, str]]:
    """The symlinks met on the way to each wanted path (/lib -> usr/lib, a venv's python):
    recreated in the view so that the paths Python was given still resolve."""
    wanted = {*view, *SYSTEM_DIRS, sys.prefix, sys.executable, *(p for p in sys.path if p)}
    found: dict[str, str] = {}
    for path in wanted:
        parts = Path(os.path.abspath(path)).parts
        for i in range(2, len(parts) + 1):
            prefix = os.path.join(*parts[:i])
            if os.path.islink(prefix) and prefix not in found:
                found[prefix] = os.readlink(prefix)
    return sorted(found.items(), key=lambda kv: kv[0].count("/"))


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _drop_capabilities(last_cap: int, nr_capset: int, bounding: bool = True) -> None:
    """No capability now nor after any exec: bounding set emptied, securebits locked (root
    gains nothing by exec; both only with `bounding`), effective/permitted/inheritable
    cleared, no_new_privs."""
    # Only what the bounding set still holds is dropped: dropping needs CAP_SETPCAP, which a
    # process started with an empty bounding set (`setpriv --bounding-set=-all`) no longer has.
    held = [
        c for c in range(last_cap + 1) if bounding and _libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1
    ]
    for cap in held:
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"dropping capability {cap}")
    if held:  # with an empty bounding set an exec regains nothing, root or not
        _check(_libc.prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_ALL, 0, 0, 0), "securebits")
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = bytes(24)  # two zeroed {effective, permitted, inheritable}
    _syscall(nr_capset, header, data, what="capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def guard() -> None:
    """Where `confine` is unavailable (no user namespaces): bound what the calling process (the
    unconfined check-task probe, single-threaded, before any of the script's code) can do to
    any other process, above all to check-task itself, which must live to give the verdict and
    the unconfined warning. Every capability it may drop is dropped (as root: the bounding set
    and securebits too, so that an exec regains none), no_new_privs, and the seccomp filter of
    `_filter_syscalls` with `own_pid`: no signal but to itself (kill, tgkill, sigqueue;
    pidfd_send_signal, tkill, fcntl/ioctl ownership for SIGIO, TIOCSTI/TIOCSIG refused), no
    rlimit but its own (prlimit64 of another process could set check-task's RLIMIT_CPU to 0),
    no ptrace, process_vm_*, pidfd_getfd, perf_event_open or kcmp, and, as when confined, no
    socket and no new process. Raises Unconfined when a step fails; check-task then reads
    /proc/PID/status itself (jev_harness/cli/check_launch.py) and runs nothing unguarded."""
    _, _, nr_capset, nr_socket, nr_prctl = arch()
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    # Only root (CAP_SETPCAP) can empty the bounding set and lock securebits; for anyone else
    # an exec under no_new_privs gains nothing anyway.
    _drop_capabilities(last_cap, nr_capset, bounding=os.geteuid() == 0)
    _filter_syscalls(nr_socket, nr_prctl, own_pid=os.getpid())


# Per architecture, the calls by which one process reaches another (see `guard`): those whose
# first argument is a pid that may be ours (kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo),
# prlimit64 (0 or ours), those refused outright (tkill, ptrace, process_vm_readv,
# process_vm_writev, perf_event_open, kcmp; pidfd_send_signal and pidfd_getfd are 424 and 438
# on both), then fcntl and ioctl (whose command is checked).
_REACH = {
    "x86_64": ((62, 234, 129, 297), 302, (200, 101, 310, 311, 298, 312), 72, 16),
    "aarch64": ((129, 131, 138, 240), 261, (130, 117, 270, 271, 241, 272), 25, 29),
}
NR_PIDFD_SEND_SIGNAL, NR_PIDFD_GETFD = 424, 438
F_SETOWN, F_SETOWN_EX = 8, 15
FIOSETOWN, SIOCSPGRP, TIOCSTI, TIOCSIG = 0x8901, 0x8902, 0x5412, 0x40045436


def _filter_syscalls(nr_socket: int, nr_prctl: int, own_pid: int | None = None) -> None:
    """seccomp: socket(2), io_uring_setup(2) (which has sockets of its own) and
    prctl(PR_SET_PDEATHSIG) (the init's parent-death signal is how the probe's deadline ends
    the namespace) fail with EACCES; a new process (fork, vfork, a clone without CLONE_THREAD)
    fails with EPERM, clone3 with ENOSYS (libc then clones a thread the old way, which its
    flags show); a foreign ABI (i386, x32) is killed. With `own_pid` (`guard`), the calls that
    reach another process fail with EPERM too."""
    audit_arch = arch()[0]
    nr_clone, nr_fork, nr_vfork = _PROCESS_CALLS[_machine()]
    asm = _Bpf()
    asm.load(4)
    asm.jump_if(audit_arch, "native")
    asm.ret(SECCOMP_RET_KILL_PROCESS)
    asm.label("native")
    asm.load(0)
    if _machine() == "x86_64":
        asm.jump_if(_X32_BIT, "eacces", op=0x35)  # nr >= the x32 bit: another ABI
    dispatch = [
        (nr_socket, "eacces"),
        (NR_IO_URING_SETUP, "eacces"),
        (NR_CLONE3, "enosys"),
        (nr_fork, "eperm"),
        (nr_vfork, "eperm"),
        (nr_clone, "clone"),
        (nr_prctl, "prctl"),
    ]
    if own_pid is not None:
        to_pid, nr_prlimit, refused, nr_fcntl, nr_ioctl = _REACH[_machine()]
        dispatch += [(nr, "own") for nr in to_pid] + [(nr_prlimit, "prlimit")]
        dispatch += [(nr, "eperm") for nr in (*refused, NR_PIDFD_SEND_SIGNAL, NR_PIDFD_GETFD)]
        dispatch += [(nr_fcntl, "fcntl"), (nr_ioctl, "ioctl")]
    for nr, where in dispatch:
        asm.jump_if(nr, where)
    asm.ret(SECCOMP_RET_ALLOW)
    asm.label("clone")
    asm.load(16)  # args[0], its low 32 bits (little-endian): clone's flags
    asm.jump_if(CLONE_THREAD, "allow", op=0x45)  # BPF_JSET: a thread
    asm.ret(SECCOMP_RET_ERRNO | EPERM)
    asm.label("prctl")
    asm.load(16)
    asm.jump_if(PR_SET_PDEATHSIG, "eacces")
    asm.ret(SECCOMP_RET_ALLOW)
    if own_pid is not None:
        for name, arg, allowed in (
            ("own", 16, (own_pid,)),  # the pid (a pid_t: the low 32 bits are all of it)
            ("prlimit", 16, (0, own_pid)),
            ("fcntl", 24, ()),  # args[1]: the command
            ("ioctl", 24, ()),
        ):
            asm.label(name)
            asm.load(arg)
            for value in allowed:
                asm.jump_if(value, "allow")
            if not allowed:
                commands: tuple[int, ...] = (F_SETOWN, F_SETOWN_EX) if name == "fcntl" else ()
                commands += (FIOSETOWN, SIOCSPGRP, TIOCSTI, TIOCSIG) if name == "ioctl" else ()
                for value in commands:
                    asm.jump_if(value, "eperm")
                asm.ret(SECCOMP_RET_ALLOW)
            else:
                asm.ret(SECCOMP_RET_ERRNO | EPERM)
    for name, action in (
        ("allow", SECCOMP_RET_ALLOW),
        ("eperm", SECCOMP_RET_ERRNO | EPERM),
        ("enosys", SECCOMP_RET_ERRNO | ENOSYS),
        ("eacces", SECCOMP_RET_ERRNO | EACCES),
    ):
        asm.label(name)
        asm.ret(action)
    code = asm.assemble()
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buf))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0), "seccomp")


class _Bpf:
    """A classic BPF program for seccomp with named jump targets (forward only)."""

    def __init__(self) -> None:
        self._insns: list[tuple[int, str | int, str | int, int]] = []
        self._labels: dict[str, int] = {}

    def load(self, offset: int) -> None:  # BPF_LD|BPF_W|BPF_ABS: seccomp_data at offset
        self._insns.append((0x20, 0, 0, offset))

    def jump_if(self, value: int, target: str, op: int = 0x15) -> None:  # BPF_JEQ by default
        self._insns.append((op, target, 0, value))

    def ret(self, action: int) -> None:
        self._insns.append((0x06, 0, 0, action))

    def label(self, name: str) -> None:
        self._labels[name] = len(self._insns)

    def assemble(self) -> bytes:
        out = []
        for i, (code, jt, jf, k) in enumerate(self._insns):
            offs = [self._labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
            if not all(0 <= o <= 255 for o in offs):
                raise Unconfined("the seccomp program's jumps are out of range")
            out.append(struct.pack("HBBI", code, offs[0], offs[1], k))
        return b"".join(out)
