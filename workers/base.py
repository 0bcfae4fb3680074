"""The worker loop shared by every worker kind: handshake, heartbeats, one request at a time.

A worker never outlives its kernel: it exits (taking every descendant along) once the kernel's
pidfd says it is gone (passed by the warm pool, or by a cold spawn), on PDEATHSIG, on a change
of parent, or after KERNEL_SILENCE_S without a kernel message (a wedged kernel). It never
crashes on a bad frame: it answers `Failed(bad_request)` with msgspec's message instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import zmq

from host.spawn import KERNEL_PIDFD_ENV
from protocol.codec import UnsupportedVersion, decode_to_worker, encode_frame
from protocol.messages import (
    HEARTBEAT_MS,
    Cancel,
    FailCode,
    Failed,
    Heartbeat,
    Ready,
    Shutdown,
    WorkerKind,
)
from workers.reaper import kill_tree
from workers.workdir import enter_workdir

# No kernel message for this long: the kernel is wedged (stopped, deadlocked). A dead kernel is
# seen at once by its pidfd (both paths), PDEATHSIG and the ppid check (cold), so silence alone
# is never taken for death sooner: at load 16-57 a live kernel's I/O thread was starved past
# the 6 s this used to be, and its workers left it.
KERNEL_SILENCE_S = 120.0
SILENCE_ENV = "JMP_KERNEL_SILENCE_S"  # a shorter window (README "Configuration"): tests of it
SILENCE_GRACE_MS = 1000  # after a stop, the socket's I/O thread needs a moment to deliver
KERNEL_PID_ENV = "JMP_KERNEL_PID"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

Send = Callable[[Any], None]
Handler = Callable[[Any, Send, threading.Event], Any]


class RequestFailed(Exception):
    """Raised by a handler for a failure it understands; becomes `Failed(code, detail)`."""

    def __init__(self, code: FailCode, detail: str) -> None:
        super().__init__(detail)
        self.code: FailCode = code
        self.detail = detail


def kernel_silence_s(env: Mapping[str, str]) -> float:
    """JMP_KERNEL_SILENCE_S (seconds, finite, > 0), else KERNEL_SILENCE_S, the contract's
    window; a value that is not such a number is ignored. Read once, at worker start."""
    try:
        value = float(env.get(SILENCE_ENV) or KERNEL_SILENCE_S)
    except ValueError:
        return KERNEL_SILENCE_S
    return value if 0 < value < float("inf") else KERNEL_SILENCE_S


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, value, 0, 0, 0)


_on_exit: list[Callable[[], None]] = []


def on_exit(cleanup: Callable[[], None]) -> None:
    """Run `cleanup` when this worker exits, any way but SIGKILL (after its tree is killed)."""
    _on_exit.append(cleanup)


def _die(code: int) -> None:
    """Kill the tree, run the on_exit cleanups, exit skipping atexit (it may wait on dead pipes)."""
    kill_tree()
    for cleanup in _on_exit:
        with contextlib.suppress(Exception):
            cleanup()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


_kernel_pidfd: int | None = None  # set by the warm pool: a pidfd of the kernel we serve


def adopt_kernel(pidfd: int) -> None:
    """Called in a worker forked by the warm pool: its parent is the pool, not the kernel, so
    the kernel is watched through this pidfd (readable once the kernel has exited)."""
    global _kernel_pidfd
    _kernel_pidfd = pidfd


def _pidfd_dead(pidfd: int) -> bool:
    import select

    poller = select.poll()  # not select(2): an MCP-heavy worker may exceed FD_SETSIZE fds
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _watch_parent() -> Callable[[], bool]:
    """Arm PDEATHSIG; return a check that is True once the kernel process is gone.

    A pool-forked worker skips PDEATHSIG and the parent check (the pool may die while the
    kernel lives) and watches the kernel's pidfd instead; the silence timeout applies to both."""
    if _kernel_pidfd is not None:
        pool_pidfd = _kernel_pidfd
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGTERM, lambda *_: _die(143))
        return lambda: _pidfd_dead(pool_pidfd)
    # The kernel spawned us, so it is our parent. JMP_KERNEL_PID (a test's stand-in kernel
    # only) is popped: our shells must not be pointed at the kernel's /proc entry.
    expected = int(os.environ.pop(KERNEL_PID_ENV, "") or os.getppid())
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    # Orphans of our shells reparent to us, so psutil still finds them at kill time.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, lambda *_: _die(143))
    # A kernel killed before we got here made us an orphan already (PDEATHSIG then never fires
    # and getppid() is our new parent): its pidfd, inherited from the kernel, still tells.
    pidfd = _inherited_pidfd()
    if pidfd is None:
        return lambda: os.getppid() != expected
    return lambda: os.getppid() != expected or _pidfd_dead(pidfd)


def _inherited_pidfd() -> int | None:
    """The kernel's pidfd a cold spawn handed us (KERNEL_PIDFD_ENV, popped), made
    non-inheritable so no shell of ours holds it; None without one."""
    try:
        fd = int(os.environ.pop(KERNEL_PIDFD_ENV, ""))
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        return None
    return fd


def _peek_id(buf: bytes) -> str | None:
    """Best effort: the `id` of a request whose frame failed to decode, for `reply_to`."""
    try:
        raw = msgspec.msgpack.decode(buf)
        ident = raw["body"]["id"]
    except Exception:
        return None
    return ident if isinstance(ident, str) else None


def decode_request(buf: bytes) -> Any:
    """A kernel message, or the `Failed` that answers an undecodable frame."""
    try:
        return decode_to_worker(buf)
    except UnsupportedVersion as exc:
        return Failed(reply_to=_peek_id(buf), code="unsupported_version", detail=str(exc))
    except (msgspec.DecodeError, ValueError, TypeError) as exc:
        return Failed(reply_to=_peek_id(buf), code="bad_request", detail=str(exc))


class _Loop:
    """The worker's main-thread state: socket, outbox, the one request in flight."""

    def __init__(self, sock: zmq.Socket[bytes], kind: WorkerKind, handler: Handler) -> None:
        self.sock, self.kind, self.handler = sock, kind, handler
        self.outbox: queue.SimpleQueue[tuple[Any, bool]] = queue.SimpleQueue()
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        self.busy: str | None = "setup"
        self.cancel = threading.Event()
        self.last_kernel = time.monotonic()
        self.silence_s = kernel_silence_s(os.environ)

    def post(self, msg: Any, final: bool = False) -> None:
        """Thread-safe send: queue the message and wake the main loop."""
        self.outbox.put((msg, final))
        with contextlib.suppress(OSError):
            os.write(self.wake_w, b"x")

    def send(self, msg: Any) -> None:
        self.sock.send(encode_frame(msg))

    def run_jobs(self, setup: Callable[[], Any] | None) -> None:
        """Handler thread: setup, then Ready, then one request at a time."""
        try:
            if setup is not None:
                setup()
        except BaseException as exc:
            detail = f"{self.kind} worker setup failed: {type(exc).__name__}: {exc}"
            self.post(Failed(reply_to=None, code="internal", detail=detail, error_class="setup"))
            self.post(None, final=True)  # None: exit after sending
            return
        self.post(Ready(pid=os.getpid(), worker=self.kind), final=True)
        while True:
            request = self.jobs.get()
            self.post(self.answer(request), final=True)

    def answer(self, request: Any) -> Any:
        try:
            if self.cancel.is_set():
                raise RequestFailed("cancelled", "cancelled before it started")
            return self.handler(request, self.post, self.cancel)
        except RequestFailed as exc:
            return Failed(reply_to=request.id, code=exc.code, detail=exc.detail)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            return Failed(
                reply_to=request.id, code="internal", detail=detail, error_class=type(exc).__name__
            )

    def accept(self, msg: Any) -> int | None:
        """Handle one decoded kernel message; an int means exit with that status."""
        self.last_kernel = time.monotonic()
        match msg:
            case Heartbeat():
                return None
            case Shutdown():
                return 0
            case Cancel(id=ident):
                if ident == self.busy:
                    self.cancel.set()
            case Failed():
                self.send(msg)
            case _ if self.busy is not None:
                detail = "not ready" if self.busy == "setup" else f"busy with {self.busy}"
                self.send(Failed(reply_to=msg.id, code="bad_request", detail=detail))
            case _:
                self.busy = msg.id
                self.cancel = threading.Event()
                self.jobs.put(msg)
        return None

    def flush(self) -> int | None:
        """Send what the handler thread posted; an int means exit with that status."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.wake_r, 4096)
        while True:
            try:
                msg, final = self.outbox.get_nowait()
            except queue.Empty:
                return None
            if msg is None:
                return 1
            self.send(msg)
            if final:
                self.busy = None


def serve(
    endpoint: str, kind: WorkerKind, handler: Handler, *, setup: Callable[[], Any] | None = None
) -> int:
    """Run the worker loop until Shutdown or kernel death; returns the exit status."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    orphaned = _watch_parent()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 500)
    sock.setsockopt(zmq.RECONNECT_IVL, 5)  # the kernel may bind just after spawning us
    sock.connect(endpoint)
    loop = _Loop(sock, kind, handler)
    threading.Thread(target=loop.run_jobs, args=(setup,), daemon=True, name="jobs").start()
    try:
        return _main_loop(loop, orphaned)
    finally:
        kill_tree()
        sock.close()
        ctx.term()


def _kernel_silent(loop: _Loop, now: float) -> bool:
    """No kernel message for the silence window (`kernel_silence_s`), and none waiting either:
    a worker that was not scheduled for a while (a loaded machine, a stop signal) finds the
    kernel's heartbeats queued in its socket and must not mistake its own absence for the
    kernel's."""
    if now - loop.last_kernel <= loop.silence_s:
        return False
    # After a stop the socket's I/O thread may not yet have moved the queued heartbeats into
    # reach: give it a moment before calling the kernel gone.
    return not loop.sock.poll(SILENCE_GRACE_MS)


def _main_loop(loop: _Loop, orphaned: Callable[[], bool]) -> int:
    poller = zmq.Poller()
    poller.register(loop.sock, zmq.POLLIN)
    poller.register(loop.wake_r, zmq.POLLIN)
    next_beat = 0.0
    last_tick = time.monotonic()
    while True:
        now = time.monotonic()
        if now - last_tick > 1.0 + HEARTBEAT_MS / 1000:
            # This loop was not scheduled (SIGSTOP, a starved machine): time spent not running
            # is not the kernel's silence.
            loop.last_kernel += now - last_tick
        last_tick = now
        if now >= next_beat:
            loop.send(Heartbeat(pid=os.getpid(), busy=loop.busy))
            next_beat = now + HEARTBEAT_MS / 1000
            if orphaned():
                print(f"{loop.kind} worker: kernel gone, exiting", file=sys.stderr)
                return 3
            if _kernel_silent(loop, now):
                silent = f"{loop.silence_s:g} s"
                print(f"{loop.kind} worker: kernel silent for {silent}, exiting", file=sys.stderr)
                return 3
        ready = dict(poller.poll(max(1, int((next_beat - time.monotonic()) * 1000))))
        if loop.wake_r in ready and (status := loop.flush()) is not None:
            return status
        while loop.sock in ready and loop.sock.poll(0):
            status = loop.accept(decode_request(loop.sock.recv()))
            if status is not None:
                return status


def main_for(kind: WorkerKind, handler_factory: Callable[[list[str]], Handler]) -> None:
    """Entry point of `python -m workers.<kind> ENDPOINT [ARGS]`; never returns."""
    enter_workdir()  # started in SPAWN_CWD: nothing of the kernel's cwd could be imported
    if len(sys.argv) < 2:
        print(f"usage: python -m workers.{kind} ENDPOINT [ARGS]", file=sys.stderr)
        os._exit(2)
    handler = handler_factory(sys.argv[2:])
    status = serve(sys.argv[1], kind, handler, setup=getattr(handler, "setup", None))
    _die(status)
