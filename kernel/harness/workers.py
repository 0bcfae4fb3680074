"""The two workers a harness run talks to: the harness worker (the task) and Jev's router.

Both are ordinary supervised workers (kernel/supervision/supervisor.py): own process group,
heartbeats, whole-tree kill, redacted output. The harness worker gets no model key in its
environment: it runs the task script's code. The router gets only the Jev key.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel.config.settings import MODEL_KEYS
from kernel.supervision.supervisor import Worker
from protocol.events import ModelStartedData, UsageData
from protocol.harness import (
    CloseTask,
    DomainOffered,
    EntriesTaken,
    EntrySpec,
    LoadTask,
    Observe,
    Observed,
    OfferDomain,
    Operate,
    Operated,
    OptionSpec,
    TakeEntries,
    TaskClosed,
    TaskLoaded,
)
from protocol.messages import Route, Routed

LOAD_TIMEOUT_S = 120.0  # a script's imports on a loaded machine
QUERY_TIMEOUT_S = 60.0  # observe and domains: in-memory work, no capture
READY_TIMEOUT_S = 60.0

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


class HarnessWorker:
    """The harness worker process: it alone holds the task, its toolkits and its store."""

    def __init__(
        self, runtime_dir: Path, redact: Callable[[str], str], secrets: tuple[str, ...] = ()
    ) -> None:
        self.secrets = secrets  # sent with LoadTask: the worker redacts the report it writes
        # Model keys never reach code that a task script brings along.
        env: dict[str, str | None] = dict.fromkeys(MODEL_KEYS)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # The one key a toolkit uses (camofox); workers inherit no key, so it is named here.
        env["CAMOFOX_ACCESS_KEY"] = os.environ.get("CAMOFOX_ACCESS_KEY") or None
        self.worker = Worker("harness", runtime_dir, env=env, redact=redact)

    def start(self) -> None:
        self.worker.start()

    @property
    def pid(self) -> int | None:
        return self.worker.pid

    def load(
        self,
        script: str,
        sha256: str,
        inputs: dict[str, Any],
        goal: str,
        context: Any,
        limits: dict[str, Any],
        timeout_s: float = LOAD_TIMEOUT_S,
    ) -> TaskLoaded:
        """Import the script (by its hashed bytes) and build the task; WorkerFailed("task")."""
        self.worker.wait_ready(READY_TIMEOUT_S)
        msg = LoadTask(
            id=_next_id("load"),
            script=script,
            sha256=sha256,
            inputs=inputs,
            goal=goal,
            context=context,
            limits=limits,
            secrets=list(self.secrets),
        )
        # A script that hangs while loading is stopped within the run's own time limit.
        limit = max(1.0, min(LOAD_TIMEOUT_S, timeout_s))
        reply: TaskLoaded = self.worker.request(msg, timeout_s=limit)
        return reply

    def observe(self) -> Observed:
        reply: Observed = self.worker.request(
            Observe(id=_next_id("observe")), timeout_s=QUERY_TIMEOUT_S
        )
        return reply

    def domain(self, tool: str, parameter: str, parents: dict[str, str]) -> list[OptionSpec]:
        msg = OfferDomain(id=_next_id("domain"), tool=tool, parameter=parameter, parents=parents)
        reply: DomainOffered = self.worker.request(msg, timeout_s=QUERY_TIMEOUT_S)
        return list(reply.options)

    def take_entries(self) -> list[EntrySpec]:
        """The entry captures to log and run (the worker hands them out once)."""
        msg = TakeEntries(id=_next_id("entries"))
        reply: EntriesTaken = self.worker.request(msg, timeout_s=QUERY_TIMEOUT_S)
        return list(reply.operations)

    def operate(
        self,
        call_id: str,
        tool: str,
        parameters: dict[str, str],
        timeout_s: float | None,
        entry: bool = False,
    ) -> Operated:
        """Run one operation (tool_started is already fsynced); WorkerDied here is uncertain."""
        msg = Operate(id=call_id, tool=tool, parameters=parameters, entry=entry)
        reply: Operated = self.worker.request(msg, timeout_s=timeout_s)
        return reply

    def close_task(self) -> list[str]:
        """Close the toolkits; problems are named, never raised."""
        if not self.worker.alive:
            return ["the harness worker is gone"]
        try:
            reply: TaskClosed = self.worker.request(
                CloseTask(id=_next_id("close")), timeout_s=QUERY_TIMEOUT_S
            )
        except Exception as exc:  # closing must never stop the final record
            return [f"{type(exc).__name__}: {exc}"]
        return list(reply.problems)

    def close(self) -> None:
        self.worker.close()


class Jev:
    """Jev's `choice` questions through the router worker, with model_started and usage records."""

    def __init__(self, session: Any, settings: Any, runtime_dir: Path) -> None:
        self.session = session
        self.settings = settings
        env: dict[str, str | None] = dict.fromkeys(MODEL_KEYS)
        env.update(settings.router_env())
        self.worker = Worker("router", runtime_dir, env=env, redact=session.redactor.text)
        self._lock = threading.Lock()

    def start(self) -> None:
        self.worker.start()

    def ask(
        self,
        question: str,
        instructions: str,
        options: list[OptionSpec],
        state: str,
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> Routed:
        """One question; labels are the option ids. WorkerFailed / WorkerDied / Cancelled raise."""
        with self._lock:
            self.worker.wait_ready(READY_TIMEOUT_S)
            model = self.settings.jev_model
            self.session.append(ModelStartedData(stage="route", model=model, provider="typesafe"))
            msg = Route(
                id=_next_id("route"),
                question=question,
                instructions=instructions,
                options={o.id: o.description for o in options},
                state=state,
            )
            reply: Routed = self.worker.request(msg, cancel=cancel, timeout_s=timeout_s)
            usage = reply.usage
            self.session.append(
                UsageData(
                    provider=usage.provider,
                    stage="route",
                    model=usage.model,
                    seconds=round(usage.seconds, 6),
                    usage=dict(usage.usage),
                )
            )
            return reply

    def close(self) -> None:
        self.worker.close()
