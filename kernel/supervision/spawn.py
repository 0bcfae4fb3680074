"""Start one worker process: forked by the warm pool when it can, else spawned cold.

Both paths give the I/O thread the same handle: `pid` (leader of its own process group),
`exited()` (without reaping, so the pid stays pinned until the tree is killed), `wait()`
(the status, like Popen.returncode; None when unknowable) and, when output is redacted,
`stdout` / `stderr` pipes. The worker's output reaches the kernel's stderr only through them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol

from host.spawn import KERNEL_PIDFD_ENV, SPAWN_CWD, WORKDIR_ENV
from kernel.supervision import pool_client

if TYPE_CHECKING:
    import subprocess


class Proc(Protocol):
    pid: int
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def exited(self) -> bool: ...

    def wait(self) -> int | None: ...


class ColdProc:
    """Today's path: a direct child of the kernel."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen, self.pid = popen, popen.pid
        self.stdout, self.stderr = popen.stdout, popen.stderr

    def exited(self) -> bool:
        try:
            found = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return found is not None

    def wait(self) -> int | None:
        return self.popen.wait()


def spawn_process(
    argv: list[str], env: dict[str, str], piped: bool, stdin_data: bytes | None = None
) -> Proc:
    """The worker, warm if the pool serves it, else cold. `piped`: stdout and stderr come back
    as pipes (for the redactor); otherwise both go to our stderr (or /dev/null without one).
    `stdin_data` (secrets: the MCP config) is written to the worker's stdin through a pipe of
    ours and never travels in its environment; a warm worker gets the pipe's read end through
    the pool, which never sees the bytes.

    The interpreter starts in SPAWN_CWD (`argv` is `host.spawn.module_argv`); the worker
    enters our cwd itself (WORKDIR_ENV), after sys.path is settled."""
    with contextlib.suppress(OSError):  # a deleted cwd: the worker stays in SPAWN_CWD
        env = {**env, WORKDIR_ENV: os.getcwd()}
    if pool_client.enabled():
        warm = _warm(argv, env, piped, stdin_data)
        if warm is not None:
            return warm
    stderr_fd = _stderr_fd()
    import subprocess  # the cold path only: a warm start never needs it

    # A pidfd of this kernel, inherited by the worker alone: a worker that starts after we died
    # (killed between its fork and its PDEATHSIG) sees it readable and exits at once, where its
    # parent (a subreaper or init by then) would tell it nothing.
    try:
        kernel_fd = os.pidfd_open(os.getpid())
    except OSError:  # no pidfds here (Linux < 5.3, a seccomp filter): PDEATHSIG alone
        kernel_fd = -1
    if kernel_fd >= 0:
        env = {**env, KERNEL_PIDFD_ENV: str(kernel_fd)}
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE
            if piped
            else (stderr_fd if stderr_fd >= 0 else subprocess.DEVNULL),
            stderr=subprocess.PIPE if piped else None,
            env=env,
            cwd=SPAWN_CWD,
            start_new_session=True,
            pass_fds=(kernel_fd,) if kernel_fd >= 0 else (),
        )
    finally:
        if kernel_fd >= 0:
            os.close(kernel_fd)
    if stdin_data is not None:
        assert popen.stdin is not None
        _hand_over(popen.stdin, stdin_data)
    return ColdProc(popen)


def _hand_over(pipe: IO[bytes], data: bytes) -> None:
    """Write `data` to the worker's stdin and close it, from a thread (a large config would
    fill the pipe before the worker reads it). A worker that dies first just loses it."""

    def write() -> None:
        with contextlib.suppress(OSError, ValueError):
            pipe.write(data)
        with contextlib.suppress(OSError, ValueError):
            pipe.close()

    threading.Thread(target=write, daemon=True, name="worker-stdin").start()


def _warm(
    argv: list[str], env: dict[str, str], piped: bool, stdin_data: bytes | None
) -> Proc | None:
    """Ask the pool; pipes are ours, their worker ends travel with the request."""
    opened: list[int] = []
    in_r = in_w = None
    try:
        if piped:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            opened += [out_r, out_w, err_r, err_w]
            sent = [out_w, err_w]
        else:
            fd = _stderr_fd()
            if fd < 0:
                fd = os.open(os.devnull, os.O_WRONLY)
                opened.append(fd)
            sent = [fd, fd]
        if stdin_data is not None:
            in_r, in_w = os.pipe()
            opened += [in_r, in_w]
        proc = pool_client.spawn(argv, env, sent[0], sent[1], in_fd=in_r)
    except OSError as exc:
        pool_client.note(f"unusable ({exc}); workers start cold")
        proc = None
    if proc is None:
        for fd in opened:
            os.close(fd)
        return None
    if in_r is not None and in_w is not None:
        os.close(in_r)  # the worker holds the only read end
        assert stdin_data is not None
        _hand_over(os.fdopen(in_w, "wb"), stdin_data)
    if not piped:
        for fd in opened:
            if fd not in (in_r, in_w):
                os.close(fd)
        return proc
    os.close(out_w)
    os.close(err_w)  # the worker holds the only write ends: EOF when it is gone
    proc.stdout, proc.stderr = os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")
    return proc


def _stderr_fd() -> int:
    """Our stderr's fd, or -1 when it has none (a pytest capture buffer)."""
    stream: Any = sys.stderr
    with contextlib.suppress(AttributeError, OSError, ValueError):
        return int(stream.fileno())
    return -1


def forward_redacted(proc: Proc, redact: Callable[[str], str]) -> None:
    """Copy the worker's stdout and stderr to our stderr, line by line, with secrets redacted.

    Worker output (an MCP server's own stderr among it) could carry a configured secret, and
    known credentials must never reach our stderr.
    """

    def pump(stream: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            for raw in iter(stream.readline, b""):
                sys.stderr.write(redact(raw.decode("utf-8", "replace")))
                sys.stderr.flush()
        with contextlib.suppress(OSError):
            stream.close()

    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=pump, args=(stream,), daemon=True, name="worker-stderr").start()
