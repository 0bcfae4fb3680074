"""Kernel side of one worker subprocess: spawn, handshake, requests, death, cleanup.

An I/O thread owns the ROUTER socket (zmq sockets are not thread-safe): it sends the kernel's
heartbeats, records the worker's descendants, notices its exit within IO_TICK_S, and hands
replies to the one waiting `request`. Whatever happens, `close()` leaves no process behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from host.inspection import forbid_inspection
from host.spawn import TOKEN_ENV, child_pythonpath, module_argv
from kernel.supervision.failures import Cancelled, NotSent, WorkerDied, WorkerFailed
from kernel.supervision.restart import (
    CANCEL_GRACE_S,
    KILL_LANDING_S,
    READY_DEFAULT_S,
    SHUTDOWN_GRACE_S,
)
from kernel.supervision.runtime import make_runtime_dir
from kernel.supervision.waits import waiting
from kernel.supervision.wire import Death, WireThread
from protocol.messages import Cancel, Failed, Progress, Ready, Shutdown, ToolProgress
from protocol.secrets import KERNEL_ONLY_VARIABLES, KEY_VARIABLES

IPC_PATH_MAX = 107  # sun_path is 108 bytes including the NUL


class Worker:
    """One worker subprocess and the socket to it. Not for concurrent requests."""

    def __init__(
        self,
        kind: str,
        runtime_dir: Path,
        env: Mapping[str, str | None] | None = None,
        argv: Sequence[str] = (),
        *,
        module: str | None = None,
        redact: Callable[[str], str] | None = None,
        stdin_data: bytes | None = None,
    ) -> None:
        self.kind = kind
        self.redact = redact  # applied to everything the worker prints
        self.stdin_data = stdin_data  # what the worker reads on stdin at start (secrets)
        self.runtime_dir = Path(runtime_dir)
        self.endpoint = f"ipc://{self.runtime_dir / kind}.sock"
        if len(self.endpoint) - len("ipc://") > IPC_PATH_MAX:
            raise ValueError(f"socket path too long for ipc:// ({self.endpoint})")
        self.module = module or f"workers.{kind}"
        self.env, self.argv = env, list(argv)
        self.token = uuid.uuid4().hex
        self.ready: Ready | None = None
        self._wire: WireThread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # --- lifecycle ------------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        """Spawn the worker; the handshake completes in the background. With `wait`, return once
        its process exists (a spawn error raises here); without, at once: the main thread goes
        on while the pool forks (issue 11), and a spawn error is a WorkerFailed ("spawn") from
        the first wait or request."""
        if self._wire is not None:
            raise RuntimeError(f"{self.kind} worker already started")
        self.runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        forbid_inspection()  # before the first child: no descendant may read our keys
        # No worker inherits a key or a kernel-only variable: each gets only what `env` names
        # (a model worker its own key). A None value removes the variable.
        hidden = (*KEY_VARIABLES, *KERNEL_ONLY_VARIABLES)
        inherited = {k: v for k, v in os.environ.items() if k not in hidden}
        merged = {**inherited, **(self.env or {})}
        env = {k: v for k, v in merged.items() if v is not None}
        env.update(
            {
                TOKEN_ENV: self.token,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "OPENHANDS_SUPPRESS_BANNER": "1",
            }
        )
        env["PYTHONPATH"] = child_pythonpath(env)
        argv = module_argv(sys.executable, self.module, [self.endpoint, *self.argv])
        self._wire = WireThread(
            self.kind, self.endpoint, argv, env, self.token, self.redact, self.stdin_data
        )
        self._wire.begin(wait)

    @property
    def pid(self) -> int | None:
        return self._wire.pid if self._wire else None

    @property
    def alive(self) -> bool:
        """True while the process runs and has not been declared dead."""
        return self._wire is not None and self._wire.death is None and not self._closed

    @property
    def exited(self) -> bool:
        """True once the process has exited, even before the I/O thread noticed (it looks every
        IO_TICK_MS): a model request must not be handed to a dead worker."""
        return self._wire is None or self._wire.exited() or self._closed

    def recorded(self, pid: int) -> bool:
        """Has the I/O thread recorded `pid` among the worker's descendants (killed with it)?"""
        tree = self._wire.tree if self._wire is not None else None
        return tree is not None and pid in tree.seen

    def wait_ready(self, timeout_s: float = READY_DEFAULT_S) -> Ready:
        """Block until the worker's Ready; raises WorkerDied, or WorkerFailed on a bad handshake."""
        wire = self._require()
        if self.ready is not None:
            return self.ready
        try:
            wire.spawned()
        except Exception as exc:
            raise WorkerFailed(
                "spawn", f"the {self.kind} worker could not be started: {exc}", type(exc).__name__
            ) from exc
        deadline = time.monotonic() + timeout_s
        with waiting(self.kind):  # a live view may say "starting tools…" meanwhile
            while True:
                msg = self._next(wire, deadline)
                if msg is None:
                    raise WorkerFailed(
                        "timeout", f"{self.kind} worker not ready after {timeout_s} s"
                    )
                if isinstance(msg, Ready):
                    self.ready = msg
                    return msg
                if isinstance(msg, Failed) and msg.reply_to is None:
                    raise WorkerFailed(msg.code, msg.detail, msg.error_class, msg.usage)

    def stop_soon(self) -> None:
        """Ask the worker to exit now, without waiting: `close` then waits for it. Closing
        several workers this way overlaps their exits (a run's end waited for each in turn)."""
        wire = self._wire
        if wire is not None and wire.death is None and not self._closed:
            wire.post(Shutdown())

    def close(self) -> None:
        """Ask the worker to exit, kill its whole tree after SHUTDOWN_GRACE_S; idempotent."""
        if self._closed:
            return
        self._closed = True
        wire = self._wire
        if wire is None:
            return
        if wire.death is None:
            wire.post(Shutdown())
            wire.wait_exit(SHUTDOWN_GRACE_S)
        wire.stop()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- requests -------------------------------------------------------------

    def request(
        self,
        msg: Any,
        on_progress: Callable[[Any], None] | None = None,  # Progress or ToolProgress
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send one request and return its reply; Failed raises WorkerFailed, death WorkerDied."""
        with self._lock:
            wire = self._require()
            if self.ready is None:
                self.wait_ready()
            if cancel is not None and cancel.is_set():
                raise NotSent(f"{self.kind} request {msg.id} cancelled before it was sent")
            wire.drain()  # stale replies of an abandoned request must not answer this one
            wire.post(msg)
            return self._await_reply(wire, msg.id, on_progress, cancel, timeout_s)

    def _await_reply(
        self,
        wire: WireThread,
        ident: str,
        on_progress: Any,
        cancel: threading.Event | None,
        timeout_s: float | None,
    ) -> Any:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            step = min(0.05, max(0.0, deadline - time.monotonic())) if deadline else 0.05
            msg = self._next(wire, time.monotonic() + step if cancel or deadline else None)
            if msg is not None and getattr(msg, "reply_to", None) == ident:
                if not isinstance(msg, Progress | ToolProgress):
                    return _unwrap(msg)
                if on_progress is not None:
                    on_progress(msg)
            # Checked after progress too: a worker that never stops talking is still stopped.
            if cancel is not None and cancel.is_set():
                return self._stop(wire, ident, "cancelled")
            if deadline is not None and time.monotonic() >= deadline:
                return self._stop(wire, ident, "timeout")

    def _stop(self, wire: WireThread, ident: str, why: str) -> Any:
        """Cancel the request; give it CANCEL_GRACE_S to answer, then kill the worker."""
        wire.post(Cancel(id=ident))
        deadline = time.monotonic() + CANCEL_GRACE_S
        # The clock is checked too: a worker that floods progress never empties the queue.
        while time.monotonic() < deadline and (msg := self._next(wire, deadline)) is not None:
            if getattr(msg, "reply_to", None) != ident or isinstance(msg, Progress | ToolProgress):
                continue
            if isinstance(msg, Failed) and msg.code == "cancelled":
                if why == "timeout":
                    raise WorkerFailed("timeout", f"{self.kind} request timed out and stopped")
                raise Cancelled(f"{self.kind} request {ident} cancelled")
            return _unwrap(msg)
        reason = f"did not stop within {CANCEL_GRACE_S:g} s after {why}"
        wire.kill(reason)
        # What it sent before it died may still be queued ahead of its Death: skip it.
        landing = time.monotonic() + KILL_LANDING_S
        while time.monotonic() < landing and self._next(wire, landing) is not None:
            pass  # its Death raises WorkerDied
        raise WorkerDied(self.kind, wire.pid or 0, None, signal.SIGKILL, f"{reason}; killed")

    def _next(self, wire: WireThread, deadline: float | None) -> Any:
        """The next message before `deadline` (None: wait), or None; raises WorkerDied."""
        item = wire.get(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if isinstance(item, Death):
            raise WorkerDied(self.kind, item.pid, item.exit_code, item.signal, item.reason)
        return item

    def _require(self) -> WireThread:
        if self._wire is None or self._closed:
            raise RuntimeError(f"{self.kind} worker is not running (start() it first)")
        return self._wire


def _unwrap(msg: Any) -> Any:
    if isinstance(msg, Failed):
        if msg.code == "cancelled":
            raise Cancelled(msg.detail)
        raise WorkerFailed(msg.code, msg.detail, msg.error_class, msg.usage)
    return msg


__all__ = [
    "Cancelled",
    "NotSent",
    "Worker",
    "WorkerDied",
    "WorkerFailed",
    "forbid_inspection",
    "make_runtime_dir",
]
