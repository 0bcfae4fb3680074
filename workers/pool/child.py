"""What the warm pool preloads, and what a freshly forked worker does before it runs.

The forked child becomes exactly what `python -m workers.<kind> ENDPOINT ...` would have been:
its own session and process group; the kernel's cgroup, umask, priority, CPU set and resource
limits (taken on before the pool answers; credentials, capabilities, no_new_privs, seccomp and
namespaces the pool has already found equal to the kernel's); the kernel's environment (read
from a pipe, never seen by the pool), cwd and argv; stdout and stderr on the kernel's pipes,
stdin the kernel's pipe when it sent one (the MCP config) else /dev/null; no other descriptor
of the pool's; default signal handlers; and `workers.base` told to watch the kernel by pidfd
(the pool, not the kernel, is its parent). It never returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import importlib
import os
import runpy
import signal
import sys
import tempfile
import traceback
from typing import NoReturn

import msgspec

from host.spawn import module_argv
from protocol import pool as P
from workers.pool import takeon as pool_takeon

# kind -> modules whose import is the slow part of that worker's start
PRELOADS: dict[str, tuple[str, ...]] = {
    "tool": (
        "openhands.tools.file_editor.definition",
        "openhands.tools.terminal.definition",
        "openhands.tools.terminal.impl",
        "openhands.sdk.mcp",
        "workers.tool.editor",
        "workers.mcp.toolset",
    ),
    "router": ("typesafe_sdk", "httpx2", "workers.calls", "workers.tls"),
    # openai imports its resources lazily: the first `client.chat` alone took 0.8 s.
    "generator": ("openai", "openai.resources.chat", "httpx", "workers.calls"),
    "harness": ("jev_harness", "jev_harness.check"),
}
# Never preload a module that a worker runs as __main__ (workers.tool.__main__, ...): runpy
# would warn and run a second copy.
_PR_SET_NAME = 15


def preload(kinds: list[str]) -> list[str]:
    """Import every module the given worker kinds need; returns the kinds that loaded.

    Imports run with LOG_LEVEL=WARNING, as the tool worker's own setup does (OpenHands logs at
    import). A kind that fails to import is skipped: its workers import it themselves.
    """
    import workers.base  # noqa: F401  (the loop every worker runs)
    from protocol import codec
    from workers.workdir import guard_sys_path

    guard_sys_path()  # litellm's import appends our cwd to sys.path: every fork would inherit it

    codec.preload()

    quiet = "LOG_LEVEL" not in os.environ
    if quiet:
        os.environ["LOG_LEVEL"] = "WARNING"
    loaded = []
    for kind in kinds:
        try:
            for name in PRELOADS[kind]:
                importlib.import_module(name)
        except Exception as exc:
            print(f"{kind}: preload failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        loaded.append(kind)
    if "router" in loaded:
        from workers import tls

        tls.preload()  # the CA bundle, parsed once (0.1-0.5 s a router start)
    if quiet:
        os.environ.pop("LOG_LEVEL", None)
    return loaded


def freeze() -> None:
    """Move every object into the GC's permanent generation before forking.

    A forked worker inherits the whole preloaded heap (every SDK of every kind); without this
    its first full collection walks millions of inherited objects holding the GIL (seconds on
    a busy machine: long enough to miss heartbeats) and touches, so copies, every page.
    """
    gc.collect()
    gc.freeze()


def threads() -> int:
    """OS threads of this process (not only Python's): fork is safe only at 1."""
    return len(os.listdir("/proc/self/task"))


def set_title(comm: str, argv: list[str]) -> None:
    """Name this process in `ps`: /proc/self/comm (15 bytes) and the argv area in place."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(comm.encode()[:15]), 0, 0, 0)
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
    except (OSError, IndexError, ValueError):
        return
    size = end - start
    data = b"\0".join(a.encode("utf-8", "replace") for a in argv)[: size - 1]
    if size > 1:
        ctypes.memmove(start, data + b"\0" * (size - len(data)), size)


def become_worker(
    msg: P.Spawn, fds: list[int], kernel_pidfd: int, kernel: pool_takeon.Kernel, report: int
) -> NoReturn:
    """In the forked child: set up like a cold spawn, then run `msg.module` as __main__.

    `fds` as the Spawn sent them: stdout, stderr, the environment pipe, stdin when `msg.stdin`.
    Before anything of the worker runs, the child keeps only the descriptors it needs (stdio,
    the kernel's pidfd as 3), takes on the kernel's settings and reads its environment from
    the pipe; then it writes b"ok" to `report` (else why not) and the pool answers Spawned.
    """
    code = 1
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it at start
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stdin_fd = fds[3] if msg.stdin else os.open(os.devnull, os.O_RDONLY)
        _keep_only([stdin_fd, fds[0], fds[1], kernel_pidfd, fds[2], report])
        env_fd, report = 4, 5
        try:
            pool_takeon.take_on(kernel)
            os.chdir(msg.cwd)
        except (pool_takeon.TakeOnError, OSError) as exc:
            _report(report, f"confined: {exc}")
            os._exit(1)
        try:
            env = P.decode_env(_read_all(env_fd, P.MAX_ENV_BYTES))
        except (OSError, ValueError, msgspec.DecodeError):
            _report(report, "fork_failed: the environment pipe held no environment")
            os._exit(1)
        os.close(env_fd)
        _report(report, "ok")
        os.close(report)
        os.environ.clear()
        os.environ.update(env)
        del env
        tempfile.tempdir = None  # the preload cached the pool's TMPDIR: use the kernel's
        kind = msg.module.rsplit(".", 1)[-1]
        set_title(f"jmp-{kind}", module_argv(sys.executable, msg.module, msg.argv))
        import workers.base

        workers.base.adopt_kernel(3)
        sys.argv = [msg.module, *msg.argv]  # replaced by the module's file path by run_module
        runpy.run_module(msg.module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _keep_only(fds: list[int]) -> None:
    """Make `fds` descriptors 0, 1, 2, ... (the first three inheritable: stdio) and close
    every other one: the pool's sockets, lock and pidfds, and anything else it held."""
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    for target, fd in enumerate(moved):
        os.dup2(fd, target, inheritable=target < 3)
    highest = max(map(int, os.listdir("/proc/self/fd")), default=0)
    os.closerange(len(fds), highest + 1)


def _read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while chunk := os.read(fd, 65536):
        size += len(chunk)
        if size > limit:
            raise ValueError("environment too large")
        chunks.append(chunk)
    return b"".join(chunks)


def _report(fd: int, text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "replace")[:4000])
