"""`open_session(...)`: a jev-harness session for direct use from Python (and the MCP server).

The returned `HarnessSession` owns the kernel session (lock, log, artifacts), the harness worker
that holds the task and, unless `direct_only`, the router worker that puts decisions to Jev:

    with open_session("examples/workspace_task.py", goal, inputs) as s:
        view = s.observe()                       # state_ref, tools, observation, artifact
        s.arguments("files.read", {}, view["state_ref"])
        s.operate("files.read", {"path": "p1"}, view["state_ref"])
        result = s.delegate()                    # or let Jev run it to the end

Refusals raise `HarnessRejected` whose `code` is a fixed word (docs/HARNESS.md section 7). The
kernel is imported here, lazily: a task script that imports `jev_harness` never loads it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel.harness.direct import HarnessSession


def open_session(
    script: str | os.PathLike[str],
    goal: str,
    inputs: dict[str, Any],
    context: Any = None,
    max_steps: int = 20,
    timeout: float = 120,
    sessions_dir: str | os.PathLike[str] | None = None,
    direct_only: bool = False,
    on_event: Any = None,
) -> HarnessSession:
    """Build the task in a harness worker and open its session; see the module docstring.

    A missing TYPESAFE_API_KEY (unless direct_only), an unreadable script or a script whose
    build raises is an error before any session exists.
    """
    pending = prepare_session(
        script, goal, inputs, context, max_steps, timeout, sessions_dir, direct_only, on_event
    )
    return pending.open()


class PendingSession:
    """A task built in its harness worker whose session is not created yet.

    `open()` creates it (once; the same HarnessSession after); `close()` instead stops the
    worker, and no session, no record is left. The MCP server holds one from its start and
    opens it at the first tool call, so a client that only lists tools leaves nothing in
    `jmp --list`."""

    def __init__(self, prepared: Any, home: Path, on_event: Any, direct_only: bool) -> None:
        self._prepared, self._home, self._on_event = prepared, home, on_event
        self.direct_only = direct_only
        self.redactor = prepared.redactor  # the session's redactor will hold the same secrets

    def open(self) -> HarnessSession:
        from kernel.harness.direct import HarnessSession

        opened = self._prepared.open(self._home, self._on_event)
        return HarnessSession(opened, self.direct_only)

    def close(self) -> None:
        self._prepared.close()


def prepare_session(
    script: str | os.PathLike[str],
    goal: str,
    inputs: dict[str, Any],
    context: Any = None,
    max_steps: int = 20,
    timeout: float = 120,
    sessions_dir: str | os.PathLike[str] | None = None,
    direct_only: bool = False,
    on_event: Any = None,
) -> PendingSession:
    """`open_session`'s checks and task build, without the session (PendingSession.open)."""
    from kernel.config.settings import Settings
    from kernel.errors import UsageError
    from kernel.harness.engine import Limits
    from kernel.harness.opening import prepare_run
    from kernel.store.session import sessions_home

    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise UsageError(f"max_steps must be a whole number >= 1, got {max_steps!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise UsageError(f"timeout must be a positive number of seconds, got {timeout!r}")
    home = Path(sessions_home(sessions_dir))
    prepared = prepare_run(
        script,
        goal,
        inputs,
        context=context,
        limits=Limits(max_steps=max_steps, timeout_s=float(timeout)),
        settings=Settings.environment(),
        direct_only=direct_only,
    )
    return PendingSession(prepared, home, on_event, direct_only)


def __getattr__(name: str) -> Any:
    if name in ("HarnessSession", "HarnessRejected"):
        from kernel.harness import direct

        return getattr(direct, name)
    raise AttributeError(name)
