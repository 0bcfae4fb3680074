"""The restart policy: when a dead worker is replaced, which request is sent again, and the one
table of supervision timeouts. `WorkerSlot` is the only code that replaces a worker.

Policy (what holds after a worker is killed at any moment):

- A worker found dead when a request is about to leave (`Worker.exited` asks the process, so a
  kill the I/O thread has not seen yet counts) is replaced first: what is left of its tree is
  killed (`Worker.close`) and a fresh worker of the same kind is spawned. Nothing was in
  flight, so nothing is lost and the run goes on. This holds for every kind: a model worker
  killed between two runs, and a tool worker that died idle (between two calls, or between
  two runs), are replaced before the next request instead of ending the run `error`.
- A request whose worker dies before answering is sent once more, to a fresh worker, when it
  has no side effect (`resend=True`): the router's and the generator's requests, and the tool
  worker's `ListTools` and `Validate`. A second death raises `WorkerDied`, as before. A
  cancelled request is never sent again.
- A tool call (`RunTool`) is never sent again (`resend=False`): its worker's death is
  `tool_uncertain` (cause `worker_exit`, kernel/loop/steps.py) and the run ends `blocked`; the
  next call, after `--ack-interrupted`, gets a fresh worker by the first rule.

The timeout table: every supervision wait is named here (the worker side, which may import only
protocol/, is pointed at below); the modules that wait import these names. Seconds:

    IO_TICK_MS          0.05  wire.py: how often the I/O thread looks at the process; a death
                              is seen within it
    HEARTBEAT_MS        0.2   both sides' heartbeat interval (protocol/messages.py)
    STARTUP_GRACE_S     30    wire.py: a spawned worker's silence before its first message
                              (a cold interpreter on a loaded machine)
    HUNG_S              10    wire.py: a worker's silence after that; it is wedged, killed, and
                              the request sees WorkerDied
    RECORD_IDLE_S       1     wire.py: how often an idle worker's descendants are recorded
                              (a busy one: on every heartbeat)
    MODEL_READY_S       30    models.py: a model worker's handshake (Ready)
    TOOL_READY_S        300   tools.py: the tool worker's handshake (a cold OpenHands import:
                              past 120 s at load 16-57); JMP_TOOL_READY_S sets it
    READY_DEFAULT_S     120   supervisor.py: Worker.wait_ready when the caller names no bound
    TOOL_BACKSTOP_S     10    tools.py: beyond a tool call's own time limit, before the kernel
                              stops the call itself
    FILE_TOOL_S         120   tools.py: a file tool's (read, write, edit) answer, before the
                              kernel stops the call itself (the editor has no limit of its
                              own: a blocked open cannot be interrupted in its thread);
                              JMP_FILE_TOOL_TIMEOUT_S sets it
    CANCEL_GRACE_S      2     supervisor.py: a cancelled or timed-out request's answer, before
                              its worker is killed
    KILL_LANDING_S      5     supervisor.py: after that kill, for the I/O thread to report it
    SHUTDOWN_GRACE_S    1     supervisor.py: Worker.close, the worker's own exit after
                              Shutdown, before its tree is killed
    TREE_WAIT_S         1     proctree.py: each round of the tree kill, for the killed to go
    POOL_CONNECT_S      3     pool_client.py: the warm pool's connect and Spawned reply (else
                              the worker starts cold)
    POOL_EXIT_STATUS_S  2     pool_client.py: the pool's Exited status of a worker that is gone

Worker side (workers/base.py, which may import only protocol/): a worker that hears nothing
from its kernel for `KERNEL_SILENCE_S` (`JMP_KERNEL_SILENCE_S` sets it at worker start) kills
its tree and exits. The harness run's own request limits (task load, observe) are in
kernel/harness/workers.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernel.supervision.failures import WorkerDied
from protocol.messages import HEARTBEAT_MS

if TYPE_CHECKING:
    from kernel.supervision.supervisor import Worker


def warn(message: str, *args: object) -> None:
    """A warning on the `jmp.supervisor` logger. logging is imported only when one is written:
    its import alone was 3% of a warm start to the first Jev request (issue 11)."""
    import logging

    logging.getLogger("jmp.supervisor").warning(message, *args)


IO_TICK_MS = 50
STARTUP_GRACE_S = 30.0
HUNG_S = 10.0  # 5 s killed healthy workers starved of CPU on a loaded 2-core machine
RECORD_IDLE_S = 1.0
MODEL_READY_S = 30.0
TOOL_READY_S = 300.0
READY_DEFAULT_S = 120.0
TOOL_BACKSTOP_S = 10.0
FILE_TOOL_S = 120.0  # a 10 MB file's encoding guess on a loaded machine takes seconds
CANCEL_GRACE_S = 2.0
KILL_LANDING_S = 5.0
SHUTDOWN_GRACE_S = 1.0
TREE_WAIT_S = 1.0
POOL_CONNECT_S = 3.0  # a wedged pool is not worth a longer wait: the worker starts cold
POOL_EXIT_STATUS_S = 2.0

__all__ = ["HEARTBEAT_MS", "WorkerSlot"]


class WorkerSlot:
    """The one worker of one kind that a handle (Models, Tools) talks to, replaced when dead.

    `spawn` builds a fresh, not yet started `Worker`. Thread-safe: `close()` may come from
    another thread than the requests (a front end shutting down).
    """

    def __init__(
        self,
        kind: str,
        spawn: Callable[[], Worker],
        ready_s: float,
        on_replace: Callable[[], None] | None = None,
        wait_spawn: bool = True,
    ) -> None:
        self.kind, self.ready_s, self.wait_spawn = kind, ready_s, wait_spawn
        self._spawn, self._on_replace = spawn, on_replace
        self._worker: Worker | None = None
        self._lock = threading.Lock()
        self.replaced = 0  # how many dead workers this slot has replaced

    @property
    def current(self) -> Worker | None:
        """The worker now in the slot (possibly dead), or None before `start()`."""
        return self._worker

    def adopt(self, worker: Worker) -> None:
        """Hold `worker`, started elsewhere (the CLI's early router, issue 11), as if this slot
        had spawned it; from now on the slot replaces and closes it."""
        with self._lock:
            assert self._worker is None, f"the {self.kind} slot already holds a worker"
            self._worker = worker

    def start(self) -> Worker:
        """The live worker, spawned now if there is none and replaced if it has exited; returns
        at once (the handshake completes in the background)."""
        with self._lock:
            worker = self._worker
            if worker is not None and worker.exited:
                self._worker = None
                worker.close()  # kills what is left of its tree, reaps it, frees its socket
                self.replaced += 1
                if self._on_replace is not None:
                    self._on_replace()
                worker = None
            if worker is None:
                worker = self._spawn()
                worker.start(wait=self.wait_spawn)
                self._worker = worker
            return worker

    def ready(self) -> Worker:
        """The live worker once it has said `Ready` (WorkerDied / WorkerFailed if it cannot)."""
        worker = self.start()
        worker.wait_ready(self.ready_s)
        return worker

    def request(
        self,
        msg: Any,
        *,
        resend: bool,
        before: Callable[[], None] | None = None,
        cancel: threading.Event | None = None,
        **options: Any,
    ) -> Any:
        """Send `msg` to the live worker and return its reply. `before` runs just before each
        time the request leaves (a `model_started` record). If the worker dies first and
        `resend` holds, the request goes once more to a fresh worker; else WorkerDied raises."""
        for attempt in (1, 2):
            worker = self.ready()
            if before is not None:
                before()
            try:
                return worker.request(msg, cancel=cancel, **options)
            except WorkerDied as exc:
                if not resend or attempt == 2 or (cancel is not None and cancel.is_set()):
                    raise
                warn("%s; its request goes once more, to a fresh worker", exc)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def stop_soon(self) -> None:
        """Ask the worker to exit, without waiting (see Worker.stop_soon)."""
        worker = self._worker
        if worker is not None:
            worker.stop_soon()

    def close(self) -> None:
        """Stop the worker and its whole tree; idempotent. A later `start()` spawns afresh."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()
