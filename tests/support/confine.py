"""`python -m tests.support.confine --seccomp -- ARGV...`: exec ARGV under a seccomp filter.

The filter allows every system call: what matters is that the process and everything it starts
run in seccomp mode 2 with one filter (`Seccomp: 2`, `Seccomp_filters: 1` in /proc/PID/status),
a confinement a warm pool started elsewhere does not have. Needs CAP_SYS_ADMIN or
no_new_privs (it sets neither).
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def allow_all_filter() -> None:
    """Install a seccomp filter that allows everything; raises OSError when refused."""
    rules = (_Filter * 1)(_Filter(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    program = _Program(1, rules)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def main(argv: list[str]) -> None:
    if argv[:2] != ["--seccomp", "--"] or len(argv) < 3:
        sys.exit("usage: python -m tests.support.confine --seccomp -- ARGV...")
    allow_all_filter()
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
