"""`python -m tests.support.landlock --write DIR[,DIR...] -- ARGV...`: exec ARGV in a new
Landlock domain where files may be written, created or removed only under the DIRs (reading
and executing stay allowed everywhere).

Raw system calls through ctypes (x86_64 numbers; the PyPI bindings are pre-releases): a
ruleset that handles every filesystem right this kernel's ABI knows, one `path_beneath` rule
per DIR granting them all, then `landlock_restrict_self` (with no_new_privs first only where
it is refused without: no CAP_SYS_ADMIN, so that as root Landlock is the only confinement
added). Every call makes a NEW domain: two processes restricted separately with the same
rules are in different domains. `available()` says why Landlock cannot be used, where not.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 (and arm64 alike)
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
# The filesystem access rights by the ABI that introduced them (1: 13 rights; 2: REFER;
# 3: TRUNCATE; 5: IOCTL_DEV).
_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 5: 1 << 15}
EXECUTE, READ_FILE, READ_DIR = 1 << 0, 1 << 2, 1 << 3


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(number: int, *args: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"syscall {number}: {os.strerror(errno)}")
    return result


def abi() -> int:
    """The Landlock ABI version of this kernel; raises OSError where there is none."""
    return _call(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def available() -> str:
    """Why Landlock cannot be used here ('' when it can)."""
    if platform.machine() not in ("x86_64", "aarch64"):
        return f"Landlock's system call numbers are not known for {platform.machine()}"
    try:
        abi()
    except OSError as exc:
        return f"Landlock is unavailable on this kernel ({exc.strerror})"
    return ""


def restrict_writes(dirs: list[str]) -> None:
    """Enter a new Landlock domain that allows every filesystem right under `dirs` and only
    reading and executing elsewhere."""
    version = abi()
    handled = sum(bits for since, bits in _RIGHTS_BY_ABI.items() if since <= version)
    attr = _RulesetAttr(handled)
    ruleset = _call(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    try:
        for directory in dirs:
            fd = os.open(directory, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(handled, fd)
                _call(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(fd)
        everywhere = os.open("/", os.O_PATH | os.O_CLOEXEC)
        try:
            rule = _PathBeneath(EXECUTE | READ_FILE | READ_DIR, everywhere)
            _call(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        finally:
            os.close(everywhere)
        try:  # with CAP_SYS_ADMIN without no_new_privs: Landlock the only confinement added
            _call(SYS_RESTRICT_SELF, ruleset, 0)
        except PermissionError:
            if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)") from None
            _call(SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[0] != "--write" or argv[2] != "--":
        sys.exit("usage: python -m tests.support.landlock --write DIR[,DIR...] -- ARGV...")
    restrict_writes(argv[1].split(","))
    os.execvp(argv[3], argv[3:])


if __name__ == "__main__":
    main(sys.argv[1:])
