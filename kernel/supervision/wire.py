"""The I/O thread behind a `Worker`: spawns the process, owns its ROUTER socket, notices death.

Only this thread touches the socket. Callers `post()` messages and `get()` replies through
queues; a death arrives in the same queue as a `Death`, after the whole tree has been killed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from kernel.supervision import restart as limits  # the one timeout table
from kernel.supervision.proctree import TreeRecord
from kernel.supervision.spawn import Proc, forward_redacted, spawn_process
from protocol.codec import UnsupportedVersion, decode_from_worker, encode_frame
from protocol.messages import Failed, Heartbeat, Ready

if TYPE_CHECKING:
    import zmq

_FRAMES_PER_TICK = 256
_MAX_BAD_LOGS = 5


@dataclass(frozen=True)
class Death:
    """The worker is gone and its tree was killed."""

    pid: int
    exit_code: int | None
    signal: int | None
    reason: str = ""


class WireThread:
    """Process + socket + queues for one worker."""

    def __init__(
        self,
        kind: str,
        endpoint: str,
        argv: list[str],
        env: dict[str, str],
        token: str,
        redact: Callable[[str], str] | None = None,
        stdin_data: bytes | None = None,
    ) -> None:
        self.kind, self.endpoint, self.argv, self.env, self.token = kind, endpoint, argv, env, token
        self.redact = redact
        self.stdin_data = stdin_data  # handed over on a pipe, never through the environment
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.death: Death | None = None
        self.pid: int | None = None
        self.tree: TreeRecord | None = None  # the descendants recorded so far (read-only outside)
        self._died = threading.Event()
        self._spawned = threading.Event()
        self._spawn_error: BaseException | None = None
        self._stopping = False
        self._kill_reason: str | None = None
        self._identity: bytes | None = None
        self._bad_frames = 0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"wire-{kind}")

    # --- caller side ----------------------------------------------------------

    def begin(self, wait: bool = True) -> None:
        """Start the thread; it spawns the process (PDEATHSIG follows the spawning thread).
        With `wait`, return once the process exists (a spawn error raises here); else at once,
        and the error raises from `spawned()`."""
        self._thread.start()
        if wait:
            self.spawned()

    def spawned(self) -> None:
        """Block until the process exists; re-raise the error that kept it from starting."""
        self._spawned.wait()
        if self._spawn_error is not None:
            raise self._spawn_error

    def post(self, msg: Any) -> None:
        self.outbox.put(msg)
        self._wake()

    def get(self, timeout: float | None) -> Any:
        """Next message or Death (sticky), None after `timeout` seconds."""
        try:
            item = self.inbox.get(timeout=timeout) if timeout != 0 else self.inbox.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, Death):
            self.inbox.put(item)  # every later call sees it too
        return item

    def drain(self) -> None:
        while (item := self.get(0)) is not None:
            if isinstance(item, Death):
                return

    def exited(self) -> bool:
        """True once the worker's process has exited, even before this thread noticed (it looks
        every IO_TICK_MS): the restart policy must not hand a request to a dead worker."""
        if self.death is not None:
            return True
        proc = getattr(self, "_proc", None)
        try:
            return proc is not None and proc.exited()
        except OSError:  # its handle was closed meanwhile: it has been buried
            return True

    def kill(self, reason: str) -> None:
        self._kill_reason = reason
        self._wake()

    def wait_exit(self, timeout_s: float) -> bool:
        return self._died.wait(timeout_s)

    def stop(self) -> None:
        """Kill whatever is left, reap, close the socket and terminate the context."""
        self._stopping = True
        self._wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    # --- the thread -----------------------------------------------------------

    def _run(self) -> None:
        # The spawn goes out first: the pool forks (on another core) while this thread imports
        # zmq and binds. The worker retries its connect every few ms until the socket exists
        # (workers/base.py), so a warm worker is Ready ~20 ms sooner (issue 11).
        try:
            # A worker's stdout goes to our stderr: with --json, stdout carries JSON lines only.
            # Forked by the warm pool when it can, else spawned cold (kernel/supervision/spawn).
            proc = spawn_process(
                self.argv, self.env, piped=self.redact is not None, stdin_data=self.stdin_data
            )
            if self.redact is not None:
                forward_redacted(proc, self.redact)
        except BaseException as exc:
            self._spawn_error = exc
            self._spawned.set()
            self._died.set()  # nothing to wait for on close
            return
        self.pid = proc.pid
        self._proc: Proc | None = proc
        tree = self.tree = TreeRecord(proc.pid, self.token)
        import zmq  # here, not at the kernel's start: this thread is the first to need it

        ctx = zmq.Context()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.bind(self.endpoint)
        except BaseException as exc:  # the worker exists: it goes, with its tree
            self._bury(proc, tree, f"its socket could not be bound: {exc}")
            self._spawned.set()
            sock.close()
            ctx.term()
            return
        self._spawned.set()
        try:
            self._loop(sock, proc, tree)
        finally:
            if self.death is None:
                self._bury(proc, tree, "closed by the kernel")
            sock.close()
            ctx.term()
            path = self.endpoint.removeprefix("ipc://")
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _loop(self, sock: zmq.Socket[bytes], proc: Proc, tree: TreeRecord) -> None:
        import zmq

        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        pending: list[Any] = []
        last_heard = last_record = next_beat = time.monotonic()
        heard_any = False
        while not self._stopping:
            ready = dict(poller.poll(limits.IO_TICK_MS))
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            # At most a tick's worth of frames, so a worker that floods the socket cannot
            # starve what follows: posted requests, the heartbeat, its death, a kill.
            for _ in range(_FRAMES_PER_TICK if sock in ready else 0):
                if not sock.poll(0):
                    break
                busy = self._receive(sock, proc.pid)
                if busy is not None:
                    heard_any, last_heard = True, time.monotonic()
                    if busy or time.monotonic() - last_record > limits.RECORD_IDLE_S:
                        tree.record()
                        last_record = time.monotonic()
            self._send_posted(sock, pending)
            now = time.monotonic()
            if now >= next_beat and self._identity is not None:
                sock.send_multipart([self._identity, encode_frame(Heartbeat(pid=os.getpid()))])
                next_beat = now + limits.HEARTBEAT_MS / 1000
            if proc.exited():
                self._bury(proc, tree, "")
                return
            silent = now - last_heard
            if self._kill_reason is None and silent > (
                limits.HUNG_S if heard_any else limits.STARTUP_GRACE_S
            ):
                self._kill_reason = f"no heartbeat for {silent:.1f} s"
            if self._kill_reason is not None:
                self._bury(proc, tree, self._kill_reason)
                return

    def _send_posted(self, sock: zmq.Socket[bytes], pending: list[Any]) -> None:
        while True:
            try:
                pending.append(self.outbox.get_nowait())
            except queue.Empty:
                break
        if self._identity is None:
            return  # held until the worker has said who it is
        for msg in pending:
            sock.send_multipart([self._identity, encode_frame(msg)])
        pending.clear()

    def _receive(self, sock: zmq.Socket[bytes], pid: int) -> bool | None:
        """Take one frame: None if not from our worker; else whether it says it is busy."""
        parts = sock.recv_multipart()
        if len(parts) != 2:
            self._drop(f"{len(parts)}-part message")
            return None
        ident, buf = parts
        try:
            msg = decode_from_worker(buf)
        except UnsupportedVersion as exc:
            if self._identity is None and _is_ready(buf):  # the handshake failed: tell wait_ready
                self.inbox.put(Failed(reply_to=None, code="unsupported_version", detail=str(exc)))
            self._drop(str(exc))
            return None
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            self._drop(str(exc))
            return None
        if self._identity is None and isinstance(msg, Ready | Heartbeat) and msg.pid == pid:
            self._identity = ident
        if ident != self._identity:
            self._drop(f"{type(msg).__name__} from an unknown peer")
            return None
        if isinstance(msg, Heartbeat):
            return msg.busy is not None
        if isinstance(msg, Failed) and msg.reply_to is None and self._ready_seen:
            self._drop(f"worker reported: {msg.code}: {msg.detail}")
            return False
        if isinstance(msg, Ready):
            self._ready_seen = True
        self.inbox.put(msg)
        return False

    _ready_seen = False

    def _drop(self, why: str) -> None:
        self._bad_frames += 1
        if self._bad_frames <= _MAX_BAD_LOGS:
            why = self.redact(why) if self.redact is not None else why
            limits.warn("%s worker: dropped a frame: %s", self.kind, why)
        elif self._bad_frames == _MAX_BAD_LOGS + 1:
            limits.warn("%s worker: dropping further bad frames silently", self.kind)

    def _bury(self, proc: Proc, tree: TreeRecord, reason: str) -> None:
        """Kill the tree while the (possibly zombie) root still pins its pid, then reap."""
        tree.kill_all(getattr(proc, "kill_root", None))
        code = proc.wait()
        if code is None:  # a warm worker whose pool died: its status is lost, not its death
            self.death = Death(proc.pid, None, None, reason or "exit status unknown")
        else:
            self.death = Death(
                proc.pid, code if code >= 0 else None, -code if code < 0 else None, reason
            )
        self.inbox.put(self.death)
        self._died.set()


def _is_ready(buf: bytes) -> bool:
    """Does this (undecodable) frame claim to be a Ready?"""
    try:
        return bool(msgspec.msgpack.decode(buf)["body"]["kind"] == "ready")
    except Exception:
        return False
