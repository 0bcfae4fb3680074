"""The harness worker, which holds the task (Jev's router is the agent's: router.py).

An ordinary supervised worker (kernel/supervision/supervisor.py): own process group,
heartbeats, whole-tree kill, redacted output. It runs the task script's code, so it gets no
known secret at all: none in its environment, none in a message (what crosses is redacted on
this side: kernel/harness/outbound.py), except a provider key (PROVIDER_KEYS) for a task that
holds a provider that sends it. The router (kernel/supervision/router.py, the same slot the
agent loop asks) gets only the Jev key, and every request it is given is redacted first.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import msgspec

from kernel.config.settings import MODEL_KEYS
from kernel.harness.outbound import Outbound
from kernel.supervision.supervisor import Worker
from protocol.harness import (
    PROVIDER_KEYS,
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
    ProvideKeys,
    TakeEntries,
    TaskClosed,
    TaskLoaded,
    WriteReport,
)

LOAD_TIMEOUT_S = 120.0  # a script's imports on a loaded machine
QUERY_TIMEOUT_S = 60.0  # observe and domains: in-memory work, no capture
READY_TIMEOUT_S = 60.0

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


class HarnessWorker:
    """The harness worker process: it alone holds the task, its toolkits and its store."""

    def __init__(self, runtime_dir: Path, outbound: Outbound) -> None:
        self.out = outbound
        # No key reaches code that a task script brings along (the supervisor passes on no key
        # variable; the model keys are named here as well).
        env: dict[str, str | None] = dict.fromkeys((*MODEL_KEYS, *PROVIDER_KEYS))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.worker = Worker("harness", runtime_dir, env=env, redact=outbound.text)

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
        resources: dict[str, int] | None = None,
    ) -> TaskLoaded:
        """Import the script (by its hashed bytes) and build the task; WorkerFailed("task").

        Goal, context and inputs go redacted; a provider key goes only to a task that asks
        for it (TaskLoaded.wants_keys), and only a key of PROVIDER_KEYS that is set."""
        self.worker.wait_ready(READY_TIMEOUT_S)
        msg = LoadTask(
            id=_next_id("load"),
            script=script,
            sha256=sha256,
            inputs=self.out.value(inputs),
            goal=self.out.text(goal),
            context=self.out.value(context),
            limits=limits,
            resources=resources or {},
        )
        # A script that hangs while loading is stopped within the run's own time limit.
        limit = max(1.0, min(LOAD_TIMEOUT_S, timeout_s))
        reply: TaskLoaded = self.worker.request(msg, timeout_s=limit)
        keys = {k: os.environ.get(k, "") for k in reply.wants_keys if k in PROVIDER_KEYS}
        keys = {k: v for k, v in keys.items() if v}
        if keys:
            self.worker.request(ProvideKeys(id=_next_id("keys"), keys=keys), timeout_s=limit)
        return msgspec.structs.replace(
            reply,
            tools=[self.out.tool(t) for t in reply.tools],
            labels=[self.out.text(label) for label in reply.labels],
            output=self.out.text(reply.output),
        )

    def observe(self) -> Observed:
        """The task's observation, offer and receipt, redacted (state_ref computed here)."""
        reply: Observed = self.worker.request(
            Observe(id=_next_id("observe")), timeout_s=QUERY_TIMEOUT_S
        )
        return self.out.observed(reply)

    def domain(self, tool: str, parameter: str, parents: dict[str, str]) -> list[OptionSpec]:
        """The options of `parameter` (ids as kernel labels, descriptions redacted)."""
        msg = OfferDomain(
            id=_next_id("domain"),
            tool=tool,
            parameter=parameter,
            parents=self.out.idents(tool, parents),
        )
        reply: DomainOffered = self.worker.request(msg, timeout_s=QUERY_TIMEOUT_S)
        return self.out.options(tool, parameter, list(reply.options))

    def take_entries(self) -> list[EntrySpec]:
        """The entry captures to log and run (the worker hands them out once)."""
        msg = TakeEntries(id=_next_id("entries"))
        reply: EntriesTaken = self.worker.request(msg, timeout_s=QUERY_TIMEOUT_S)
        return [
            EntrySpec(tool=e.tool, parameters=self.out.labels(e.tool, dict(e.parameters)))
            for e in reply.operations
        ]

    def operate(
        self,
        call_id: str,
        tool: str,
        parameters: dict[str, str],
        timeout_s: float | None,
        entry: bool = False,
    ) -> Operated:
        """Run one operation (tool_started is already fsynced); WorkerDied here is uncertain.

        A report the operation hands over is redacted here and only then written by the
        worker (WriteReport): no known secret is ever on disk, not even for a moment."""
        ids = self.out.idents(tool, parameters)
        msg = Operate(id=call_id, tool=tool, parameters=ids, entry=entry)
        reply: Operated = self.worker.request(msg, timeout_s=timeout_s)
        if reply.report is not None:
            write = WriteReport(id=f"{call_id}.write", document=self.out.values(reply.report))
            reply = self.worker.request(write, timeout_s=timeout_s)
        return self.out.operated(reply)

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
