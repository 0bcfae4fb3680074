"""What the warm pool preloads, and what a freshly forked worker does before it runs.

The forked child becomes exactly what `python -m workers.<kind> ENDPOINT ...` would have been:
its own session and process group, the kernel's environment, cwd and argv, stdout and stderr
on the kernel's pipes, stdin the kernel's pipe when it sent one (the MCP config) else
/dev/null, default signal handlers, and `workers.base` told to watch the kernel by pidfd (the
pool, not the kernel, is its parent). It never returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import resource
import runpy
import signal
import sys
import tempfile
import traceback

# kind -> modules whose import is the slow part of that worker's start
PRELOADS: dict[str, tuple[str, ...]] = {
    "tool": (
        "openhands.tools.file_editor.definition",
        "openhands.tools.terminal.definition",
        "openhands.tools.terminal.impl",
        "openhands.sdk.mcp",
        "workers.editor",
        "workers.mcp",
    ),
    "router": ("typesafe_sdk", "httpx2", "workers.calls", "workers.tls"),
    # openai imports its resources lazily: the first `client.chat` alone took 0.8 s.
    "generator": ("openai", "openai.resources.chat", "httpx", "workers.calls"),
    "harness": ("jev_harness", "jev_harness.check"),
}
# Never preload a module that a worker runs as __main__ (workers.tool, ...): runpy would warn
# and run a second copy.
_PR_SET_NAME = 15


def preload(kinds: list[str]) -> list[str]:
    """Import every module the given worker kinds need; returns the kinds that loaded.

    Imports run with LOG_LEVEL=WARNING, as the tool worker's own setup does (OpenHands logs at
    import). A kind that fails to import is skipped: its workers import it themselves.
    """
    import workers.base  # noqa: F401  (the loop every worker runs)
    from protocol import codec

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


# A worker gets its kernel's limits, never the pool's: the pool was launched by some earlier
# kernel, perhaps under a file-size limit (found by the chaos runner: every later worker then
# failed its writes with EFBIG).
LIMITS = (
    resource.RLIMIT_FSIZE,
    resource.RLIMIT_NOFILE,
    resource.RLIMIT_CORE,
    resource.RLIMIT_CPU,
    resource.RLIMIT_AS,
    resource.RLIMIT_DATA,
    resource.RLIMIT_STACK,
    resource.RLIMIT_NPROC,
)


def _above(a: int, b: int) -> bool:
    """a > b for limits (RLIM_INFINITY is the largest)."""
    inf = resource.RLIM_INFINITY
    return a != b and (a == inf or (b != inf and a > b))


def _may_raise_limits() -> bool:
    """CAP_SYS_RESOURCE (bit 24) is in this process's effective set (root without it cannot)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            caps = next(line for line in status if line.startswith("CapEff:"))
        return bool(int(caps.split()[1], 16) >> 24 & 1)
    except (OSError, StopIteration, ValueError):
        return False


def kernel_limits(pid: int) -> dict[int, tuple[int, int]] | None:
    """The kernel's resource limits, or None when this pool cannot give them to a child (a hard
    limit above the pool's own needs privilege, or they cannot be read): then no fork."""
    limits: dict[int, tuple[int, int]] = {}
    for res in LIMITS:
        try:
            soft, hard = resource.prlimit(pid, res)
        except (OSError, ValueError):
            return None
        if _above(hard, resource.getrlimit(res)[1]) and not _may_raise_limits():
            return None
        limits[res] = (soft, hard)
    return limits


def set_limits(limits: dict[int, tuple[int, int]]) -> None:
    """In the forked child, before anything else: take the kernel's limits."""
    for res, value in limits.items():
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(res, value)


def become_worker(
    module: str,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    fds: list[int],
    kernel_pidfd: int,
    close: list[int],
) -> None:
    """In the forked child: set up like a cold spawn, then run `module` as __main__.

    `fds`: the worker's stdout and stderr, and its stdin when the kernel sent a third.
    """
    code = 1
    try:
        os.setsid()
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it at start
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stdin_fd = fds[2] if len(fds) > 2 else os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin_fd, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in {stdin_fd, fds[0], fds[1]} - {0, 1, 2}:
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # the preload cached the pool's TMPDIR: use the kernel's
        kind = module.rsplit(".", 1)[-1]
        set_title(f"jmp-{kind}", [sys.executable, "-m", module, *argv])
        import workers.base

        workers.base.adopt_kernel(kernel_pidfd)
        sys.argv = [module, *argv]  # replaced by the module's file path by run_module
        runpy.run_module(module, run_name="__main__", alter_sys=True)
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
