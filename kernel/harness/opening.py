"""Opening a harness run: check, start workers, build the task, then create the session.

Order matters for what a failure leaves behind: a missing key, a missing script or a script
whose build raises is reported before any session exists (`prepare_run`); once the session
exists (`Prepared.open`), its first records are `session` (created_by "jev-harness"), `user`
(the goal), `task`, `run_started`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.errors import ConfigError, JmpError, UsageError
from kernel.harness.engine import Engine, Limits
from kernel.harness.outbound import Outbound
from kernel.harness.state import check_goal
from kernel.harness.workers import HarnessWorker
from kernel.run.ledger import crash_point
from kernel.store.redact import Redactor
from kernel.supervision.models import model_worker
from kernel.supervision.router import Router
from kernel.supervision.supervisor import WorkerDied, WorkerFailed, make_runtime_dir
from protocol.events import RunStartedData, TaskData, UserData
from protocol.harness import PROVIDER_KEYS, TaskLoaded
from protocol.limits import LimitsError
from protocol.limits import from_env as script_limits
from protocol.text import clean

CREATED_BY = "jev-harness"
EXTRA_SECRETS = PROVIDER_KEYS  # secrets a toolkit's provider sends, redacted like model keys


class TaskScriptError(JmpError):
    """The task script could not be loaded or built (its traceback summary in the message)."""


@dataclass
class Opened:
    """Everything an open harness run owns; `close()` releases all of it."""

    session: Any
    harness: HarnessWorker
    router: Router | None
    engine: Engine
    runtime_dir: Path

    def close(self) -> None:
        """Stop both workers (whole trees), release the session lock; idempotent."""
        for worker in (self.router, self.harness):
            if worker is not None:
                worker.close()
        self.session.close()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def script_digest(script: str | os.PathLike[str]) -> tuple[str, str]:
    """The script's absolute path and the sha256 of its bytes; UsageError if unreadable."""
    path = Path(script).expanduser().absolute()
    try:  # non-blocking: a FIFO given as the script must not hang the run
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"task script {script}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"task script {script} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
    finally:
        os.close(fd)
    return str(path), hashlib.sha256(data).hexdigest()


@dataclass
class Prepared:
    """A run whose task is built in its harness worker, before any session exists.

    `open()` creates the session (its first records; Jev's router unless direct-only) and
    hands the worker on to the `Opened`; `close()` instead stops the worker and leaves nothing
    behind: no session, no record. A front end that may never be asked to act (the MCP server
    a client only lists tools of) prepares at start and opens at the first call."""

    harness: HarnessWorker
    runtime_dir: Path
    loaded: TaskLoaded
    redactor: Redactor
    goal: str
    context: Any
    path: str
    sha256: str
    inputs: dict[str, Any]
    limits: Limits
    settings: Any
    direct_only: bool
    started: float

    def open(self, home: Path, on_event: Callable[[Any], None] | None = None) -> Opened:
        """Create the session and its first records; on failure the worker is stopped too."""
        try:
            session = _create(home, on_event, self.redactor)
        except BaseException:
            self.close()
            raise
        router = None if self.direct_only else _router(session, self.settings, self.runtime_dir)
        try:
            if router is not None:
                router.start()
            _first_records(
                session,
                self.goal,
                self.path,
                self.sha256,
                self.inputs,
                self.context,
                self.limits,
                self.loaded,
                self.settings,
                self.direct_only,
            )
            engine = Engine(
                session,
                self.harness,
                router,
                self.goal,
                self.limits,
                self.loaded,
                started=self.started,
                context=self.context,
            )
        except BaseException:
            Opened(session, self.harness, router, None, self.runtime_dir).close()  # type: ignore[arg-type]
            raise
        return Opened(session, self.harness, router, engine, self.runtime_dir)

    def close(self) -> None:
        """Close the task's toolkits and stop the worker (a run that never opened); idempotent."""
        if self.harness.worker.alive:
            self.harness.close_task()
        self.harness.close()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def prepare_run(
    script: str | os.PathLike[str],
    goal: str,
    inputs: dict[str, Any],
    *,
    context: Any,
    limits: Limits,
    settings: Any,
    direct_only: bool,
) -> Prepared:
    """Check, start the harness worker and build the task; no session yet, nothing left on
    failure (a missing key, script or a build that raises is named before anything exists)."""
    started = time.monotonic()  # --timeout counts from here
    goal = clean(goal)
    check_goal(goal)
    if not isinstance(inputs, dict):
        raise UsageError("inputs must be a JSON object")
    if not direct_only and not settings.typesafe_api_key:
        raise ConfigError("not set: TYPESAFE_API_KEY (Jev decides each tool and parameter)")
    try:  # the worker sets them on itself (a warm one has the pool's environment, not ours)
        resources = script_limits().as_dict()
    except LimitsError as exc:
        raise UsageError(str(exc)) from None
    path, sha256 = script_digest(script)
    secrets = [*settings.secrets, *(os.environ.get(k, "") for k in EXTRA_SECRETS)]
    redactor = Redactor(tuple(s for s in secrets if s))
    # From here on the run knows the goal and context only redacted: the task script, Jev and
    # every caller see those (the log redacts the originals itself).
    goal, context = redactor.text(goal), redactor.value(context)
    runtime = make_runtime_dir()
    harness = HarnessWorker(runtime, Outbound(redactor))
    try:
        harness.start()
        limit_view = {"max_steps": limits.max_steps, "timeout_s": limits.timeout_s}
        loaded = _load(harness, path, (sha256, inputs, goal, context), limit_view, resources)
    except BaseException:
        harness.close()
        shutil.rmtree(runtime, ignore_errors=True)
        raise
    return Prepared(
        harness,
        runtime,
        loaded,
        redactor,
        goal,
        context,
        path,
        sha256,
        inputs,
        limits,
        settings,
        direct_only,
        started,
    )


def _router(session: Any, settings: Any, runtime: Path) -> Router:
    """Jev's router slot for this run: the agent loop's, replaced when it dies between two
    decisions; only the Jev key in its environment, its output through the session's redactor."""
    return Router(
        session, settings, lambda: model_worker("router", settings, runtime, session.redactor.text)
    )


def _load(
    harness: HarnessWorker,
    path: str,
    task: tuple[str, dict[str, Any], str, Any],
    limits: dict[str, Any],
    resources: dict[str, int],
) -> TaskLoaded:
    sha256, inputs, goal, context = task
    try:
        return harness.load(
            path, sha256, inputs, goal, context, limits, limits["timeout_s"], resources
        )
    except WorkerFailed as exc:
        raise TaskScriptError(f"task script {path}: {exc.detail}") from None
    except WorkerDied as exc:
        raise TaskScriptError(f"task script {path}: the harness worker died: {exc}") from None


def _create(home: Path, on_event: Any, redactor: Redactor) -> Any:
    from kernel.store.session import Session

    return Session.create(
        home,
        Path.cwd(),
        on_event=on_event,
        secrets=tuple(redactor.secrets),
        created_by=CREATED_BY,
    )


def _first_records(
    session: Any,
    goal: str,
    path: str,
    sha256: str,
    inputs: dict[str, Any],
    context: Any,
    limits: Limits,
    loaded: TaskLoaded,
    settings: Any,
    direct_only: bool,
) -> None:
    session.append(UserData(text=goal))
    session.append(
        TaskData(
            script=path,
            sha256=sha256,
            inputs=inputs,
            context=context,
            max_steps=limits.max_steps,
            timeout_s=limits.timeout_s,
            limits={"max_steps": limits.max_steps, "timeout_s": limits.timeout_s},
            toolkits=list(loaded.toolkits),
            tools=[t.name for t in loaded.tools],
            labels=list(loaded.labels),
            output=loaded.output,
            tool_selection=loaded.tool_selection,
            direct_only=direct_only,
        )
    )
    model = "" if direct_only else settings.jev_model
    # Durable, with the request and the task before it: a kill from here on leaves a run
    # that `inspect` settles, never a session without its request (DECISIONS).
    session.append(
        RunStartedData(model=model, router_model=model, workspace=str(session.workspace)),
        durable=True,
    )
    crash_point("after_run_started")
