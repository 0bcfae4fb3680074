"""How a request to a worker can fail: the worker died, it failed the request, or it was cancelled.

Apart from `supervisor.py` (which re-exports them) so that the restart policy
(`restart.py`) can tell a death from a failure without importing the supervisor.
"""

from __future__ import annotations

import signal

from kernel.errors import JmpError
from protocol.messages import ModelUsage


class WorkerDied(JmpError):
    """The worker process is gone (or was killed for hanging); its tree is gone too."""

    def __init__(
        self, kind: str, pid: int, exit_code: int | None, signal: int | None, reason: str = ""
    ) -> None:
        self.kind, self.pid, self.signal = kind, pid, signal
        self.worker_exit_code = exit_code  # the worker's status (exit_code is jmp's own: 2)
        self.reason = reason
        if signal is not None:
            how = f"was killed by {_signame(signal)}"
        else:
            how = f"exited with status {exit_code}"
        super().__init__(f"{kind} worker (pid {pid}) {how}" + (f" ({reason})" if reason else ""))


class WorkerFailed(JmpError):
    """The worker understood the request and refused or failed it."""

    def __init__(
        self, code: str, detail: str, error_class: str = "", usage: ModelUsage | None = None
    ) -> None:
        self.code, self.detail, self.error_class = code, detail, error_class
        self.usage = usage  # the model call's usage, when it answered unusably
        super().__init__(f"{code}: {detail}")


class Cancelled(JmpError):
    """The request was cancelled and the worker confirmed it stopped."""


class NotSent(Cancelled):
    """Cancelled before the request was sent: the worker never saw it (nothing ran)."""


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
