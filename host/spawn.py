"""The spawn contract: names both the kernel and its workers read, and how jmp starts Python.

Pure data. The kernel sets these when it starts a worker (kernel/supervision/), the worker reads
them (workers/); neither side spells the names itself.

Every Python process jmp starts itself (a worker, the warm pool, the check-task probe) runs
`python -P -m MODULE` from SPAWN_CWD: `-P` keeps the launch directory (the default workspace,
which the model's `write` tool fills) off sys.path, so none of its files can shadow a module
of ours or of a vendor (`zmq.py`, `workers/__init__.py`, ...) in a process that holds a key.
A child that needs another working directory enters it once the interpreter has settled
sys.path (a worker: WORKDIR_ENV), so a relative PYTHONPATH entry is resolved against "/" too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

# Every process of a worker's tree carries this token: the kernel finds and kills the whole tree
# by it, and an MCP server the tool worker starts inherits it.
TOKEN_ENV = "JMP_WORKER_TOKEN"
# The directory a worker works in (the kernel's cwd): `workers.base` enters it and removes the
# variable before the worker reads its arguments, so no shell or MCP server inherits it.
WORKDIR_ENV = "JMP_WORKER_CWD"
# A cold worker's descriptor of its kernel (a pidfd, readable once the kernel has exited), by
# number: a worker whose kernel died before it armed PDEATHSIG is reparented at once, so its
# parent no longer tells it anything. `workers.base` removes the variable on start.
KERNEL_PIDFD_ENV = "JMP_KERNEL_PIDFD"
SAFE_FLAGS = ("-P",)  # no cwd (or script dir) first on sys.path
SPAWN_CWD = "/"
CODE_ROOT = Path(__file__).resolve().parents[1]


def module_argv(python: str, module: str, args: Sequence[str] = ()) -> list[str]:
    """`python -P -m MODULE ARGS...`: how jmp starts a Python module of its own."""
    return [python, *SAFE_FLAGS, "-m", module, *args]


def module_of(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """(module, args) of a `module_argv` command line; None for any other command."""
    head = 1 + len(SAFE_FLAGS)
    if len(argv) < head + 2 or tuple(argv[1:head]) != SAFE_FLAGS or argv[head] != "-m":
        return None
    return argv[head + 1], list(argv[head + 2 :])


def child_pythonpath(env: Mapping[str, str]) -> str:
    """PYTHONPATH for a child of ours: our code first, then the user's own entries (theirs to
    choose; relative ones resolve against SPAWN_CWD)."""
    return os.pathsep.join(filter(None, [str(CODE_ROOT), env.get("PYTHONPATH")]))
