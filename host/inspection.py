"""The one process-wide protection every jmp process that holds a key applies to itself.

`forbid_inspection()` makes the calling process non-dumpable (PR_SET_DUMPABLE 0): a same-user
process, a shell the model started among them, can then read neither /proc/PID/environ nor
/proc/PID/mem of it, nor attach a debugger, and it leaves no core dump. Root (CAP_SYS_PTRACE)
ignores the flag. A fork inherits it; exec resets it (so the shells a tool worker runs are
ordinary processes again), which is why every key holder sets it itself before its first child
exists: the front ends (CLI, `jmp --acp`, jev-harness, its MCP server) first thing in `main`
(the CLI once its arguments are read), an embedding program when it reads its settings or
starts a worker, every worker at the import of `workers` (a forked one already has it from the
pool). A prctl, the one system call in
`protocol/`, because kernel and workers share it and workers import nothing else of ours.
"""

from __future__ import annotations

import contextlib
import ctypes

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def forbid_inspection() -> None:
    """Make this process non-dumpable; idempotent, a no-op where prctl is missing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def dumpable() -> bool:
    """Is this process still dumpable (inspectable by its own user)?"""
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL(None, use_errno=True).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    return True
