"""The kernel's side of the two model workers: Jev (router) and Flash (generator).

Each request writes `model_started` before it leaves, emits transient `model_progress`
(character counts only) while it streams, and writes `usage` when it returns (the router's
questions: router.py, which a jev-harness run asks too). A dead worker is
replaced, and a request lost to one is sent once more (restart.py: model calls have no side
effect), so a lost request leaves a `model_started` without `usage`. Failures come back as
`WorkerFailed` / `WorkerDied` / `Cancelled` and are recorded by the agent.
"""

from __future__ import annotations

import itertools
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from kernel.config.settings import MODEL_KEYS
from kernel.supervision.failures import WorkerFailed
from kernel.supervision.restart import MODEL_READY_S, WorkerSlot
from kernel.supervision.router import Router, record_started, record_usage
from protocol.events import ModelProgressData, Stage
from protocol.messages import Generate, Generated, Message, Progress, Routed, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernel.config.settings import Settings
    from kernel.store.session import Session
    from kernel.supervision.supervisor import Worker


def worker_env(extra: dict[str, str], drop: tuple[str, ...] = ()) -> dict[str, str | None]:
    """A model worker's environment on top of ours: its own settings, no other worker's key."""
    env: dict[str, str | None] = dict.fromkeys(drop)
    env.update(extra)
    return env


def model_worker(
    kind: str, settings: Settings, runtime: Path, redact: Callable[[str], str]
) -> Worker:
    """A fresh router or generator worker, not started; only its own key is in its environment,
    and nothing it prints reaches us but through `redact`."""
    from kernel.supervision.supervisor import Worker

    own = settings.router_env() if kind == "router" else settings.generator_env()
    return Worker(kind, runtime, env=worker_env(own, MODEL_KEYS), redact=redact)


def start_router(settings: Settings, redact: Callable[[str], str]) -> Worker:
    """The router alone, started before any session exists: the CLI asks for it first, so that
    its start overlaps the kernel's own imports and the session's opening (issue 11; the first
    model request is always a route). Hand it to `Models(router=...)`, or `close()` it."""
    from kernel.supervision.supervisor import make_runtime_dir

    worker = model_worker("router", settings, make_runtime_dir(), redact)
    worker.start(wait=False)  # the kernel imports on while the pool forks it
    return worker


class Models:
    """Router and generator workers for one session; started lazily, closed by `close()`.

    `router`: one from `start_router`, now owned (and closed) by these Models."""

    def __init__(self, session: Session, settings: Settings, router: Worker | None = None) -> None:
        self.session = session
        self.settings = settings
        session.redactor.add(*settings.secrets)
        self._ids = itertools.count(1)
        self._runtime: Path | None = router.runtime_dir if router is not None else None
        self._router: Router | None = None
        self._generator: WorkerSlot | None = None
        self._early = router

    def start(self) -> None:
        """Spawn both workers now (non-blocking), the router first, or replace either that
        died; a missing key is a ConfigError here."""
        if self._router is None or self._generator is None:
            from kernel.supervision.supervisor import make_runtime_dir

            self.settings.require_keys()
            if self._runtime is None:
                self._runtime = make_runtime_dir()
            early, self._early = self._early, None
            self._router = Router(self.session, self.settings, partial(self._new, "router"), early)
            # Not waited for: the first route is prepared while the pool forks it.
            self._generator = WorkerSlot(
                "generator", partial(self._new, "generator"), MODEL_READY_S, wait_spawn=False
            )
        self._router.start()
        self._generator.start()

    @property
    def _slots(self) -> dict[str, WorkerSlot]:
        """The started slots by kind (none before `start`)."""
        if self._router is None or self._generator is None:
            return {}
        return {"router": self._router.slot, "generator": self._generator}

    def _new(self, kind: str) -> Worker:
        """A fresh worker of `kind`, not started; nothing it prints may carry a key."""
        assert self._runtime is not None
        return model_worker(kind, self.settings, self._runtime, self.session.redactor.text)

    def _started_router(self) -> Router:
        if self._router is None:
            self.start()
        assert self._router is not None
        return self._router

    def _next_id(self, stage: str) -> str:
        return f"{stage}-{next(self._ids)}"

    def route(
        self,
        question: Stage,
        instructions: str,
        options: dict[str, str],
        state: str,
        cancel: threading.Event | None = None,
    ) -> Routed:
        """One Jev `choice` request (router.py); labels are exactly the keys of `options`."""
        router = self._started_router()
        return router.ask(question, question, instructions, options, state, cancel=cancel)

    def generate(
        self,
        stage: Stage,
        messages: list[Message],
        tool: ToolSpec | None = None,
        cancel: threading.Event | None = None,
        on_text: Callable[[int, str], None] | None = None,
    ) -> Generated:
        """One streamed Flash request: forced `selected_action` arguments, or prose.

        `on_text(offset, text)`: an answer's text as it streams, unredacted (offset: where it
        starts in the answer; a resent request starts again at 0). Never given argument text,
        and never an event: `model_progress` carries counts only.
        """
        model = self.settings.flash_model

        def progress(p: Progress) -> None:
            self.session.emit(ModelProgressData(stage=stage, characters=p.characters, model=model))
            if on_text is not None and p.text and tool is None:
                on_text(p.characters - len(p.text), p.text)

        msg = Generate(
            id=self._next_id(stage),
            stage="respond" if stage != "generate" else "generate",
            messages=messages,
            tool_name=tool.name if tool else None,
            tool_description=tool.description if tool else "",
            tool_schema=dict(tool.parameters) if tool else None,
        )
        if self._generator is None:
            self.start()
        assert self._generator is not None
        try:
            reply = self._generator.request(
                msg,
                resend=True,
                before=lambda: record_started(self.session, stage, model, "openai-compatible"),
                cancel=cancel,
                on_progress=progress,
            )
        except WorkerFailed as exc:
            if exc.usage is not None:  # it answered, unusably: the tokens were still spent
                record_usage(self.session, stage, exc.usage)
            raise
        assert isinstance(reply, Generated)
        record_usage(self.session, stage, reply.usage)
        return reply

    def stop_soon(self) -> None:
        """Ask both workers to exit, without waiting; `close` waits."""
        for slot in self._slots.values():
            slot.stop_soon()

    def close(self) -> None:
        """Stop both workers and their trees; idempotent."""
        if self._early is not None:  # adopted but never started
            self._early.close()
            self._early = None
        for slot in self._slots.values():
            slot.close()
        self._router = self._generator = None
        if self._runtime is not None:
            import shutil  # on the way out: its import (bz2, lzma) slows a warm start

            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None
