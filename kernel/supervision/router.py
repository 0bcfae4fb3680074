"""Jev's router worker for one session, as both loops ask it: one slot, one recording, one check.

The agent loop (through `Models.route`) and a jev-harness run (kernel/harness/decisions.py) put
their `choice` questions here alike:

- the worker sits in a `WorkerSlot` (restart.py): one found dead before a question is replaced,
  and a question lost to a death is sent once more (a model call has no side effect), so a
  router killed between two decisions costs nothing and one killed during a question costs one
  resend;
- every time a question leaves, `model_started` is written first; `usage` when it returns;
- every string of the request passes the session's redactor: a label that redaction changes is
  sent as its redacted text (made unique) and mapped back in the answer;
- the answer is checked against the API's own rules (jev_answer.py) before anyone uses it: one
  that breaks a rule is `WorkerFailed("invalid_answer")`, never a decision.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from kernel.supervision import jev_answer
from kernel.supervision.failures import WorkerFailed
from kernel.supervision.restart import MODEL_READY_S, WorkerSlot
from protocol.events import ModelStartedData, Stage, UsageData
from protocol.messages import ModelUsage, Route, Routed

if TYPE_CHECKING:
    from kernel.config.settings import Settings
    from kernel.store.session import Session
    from kernel.supervision.supervisor import Worker


def record_started(session: Session, stage: Stage, model: str, provider: str) -> None:
    """The `model_started` record, written each time a model request leaves."""
    session.append(ModelStartedData(stage=stage, model=model, provider=provider))


def record_usage(session: Session, stage: Stage, usage: ModelUsage) -> None:
    """The `usage` record of one model request that answered."""
    session.append(
        UsageData(
            provider=usage.provider,
            stage=stage,
            model=usage.model,
            seconds=round(usage.seconds, 6),
            usage=dict(usage.usage),
        )
    )


class Router:
    """The router slot of one session. `spawn` builds a fresh, not yet started router worker
    (models.py `model_worker`); `early` is one started already (the CLI's, issue 11), held as
    if this slot had spawned it."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        spawn: Callable[[], Worker],
        early: Worker | None = None,
    ) -> None:
        self.session = session
        self.settings = settings
        # Not waited for: the first question is prepared while the pool forks it.
        self.slot = WorkerSlot("router", spawn, MODEL_READY_S, wait_spawn=False)
        if early is not None:
            self.slot.adopt(early)
        self._ids = itertools.count(1)

    def start(self) -> None:
        """Spawn the worker now (non-blocking), or replace one that died."""
        self.slot.start()

    def ask(
        self,
        stage: Stage,
        question: str,
        instructions: str,
        options: dict[str, str],
        state: str,
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> Routed:
        """One `choice` question over `options` (label -> description); the answer's labels are
        exactly the keys of `options`. WorkerFailed / WorkerDied / Cancelled raise."""
        redact = self.session.redactor.text
        sent: dict[str, str] = {}  # label as sent -> label as offered
        for label in options:
            shown = base = redact(label)
            n = 2
            while shown in sent:
                shown, n = f"{base}~{n}", n + 1
            sent[shown] = label
        msg = Route(
            id=f"{stage}-{next(self._ids)}",
            question=redact(question),
            instructions=redact(instructions),
            options={shown: redact(options[label]) for shown, label in sent.items()},
            state=redact(state),
        )
        model = self.settings.jev_model
        reply = self.slot.request(
            msg,
            resend=True,
            before=lambda: record_started(self.session, stage, model, "typesafe"),
            cancel=cancel,
            timeout_s=timeout_s,
        )
        assert isinstance(reply, Routed)
        record_usage(self.session, stage, reply.usage)
        reply = msgspec.structs.replace(
            reply,
            choice=sent.get(reply.choice, reply.choice),
            probabilities={sent.get(k, k): p for k, p in reply.probabilities.items()},
        )
        bad = jev_answer.problem(list(options), reply.choice, reply.confidence, reply.probabilities)
        if bad:  # the API's own rules: an answer that breaks one is never acted on
            raise WorkerFailed("invalid_answer", bad, "InvalidRouterAnswer", reply.usage)
        return reply

    def stop_soon(self) -> None:
        """Ask the worker to exit, without waiting; `close` waits."""
        self.slot.stop_soon()

    def close(self) -> None:
        """Stop the worker and its tree; idempotent."""
        self.slot.close()
