"""The agent loop: route with Jev, review `done`, generate or offload arguments, run tools.

States of one run (`Agent.run`):
  PREPARE  record uncertain calls, the request, run_started -> blocked if unsettled
  ROUTE    Jev picks a label                        -> needs_input below the floor
  REVIEW   a proposed `done` gets completion_review -> RESPOND / ROUTE without done / blocked
  STEP     a tool call (kernel/loop/steps.py)            -> ROUTE, or blocked on uncertainty
  RESPOND  Flash writes the answer (or `ask`)       -> completed / needs_input
Every way a run ends raises RunEnded (kernel/errors.py); `_run` alone catches it and writes the
run's one `final` event. The lock and the workers are released by `close()`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from kernel.context.policy import ContextPolicy
from kernel.errors import ContextOverflow, RunEnded, StorageError, UsageError
from kernel.loop import admit, prompts
from kernel.loop.steps import ToolStep
from kernel.store import pending
from kernel.supervision.supervisor import Cancelled, WorkerDied, WorkerFailed
from protocol.events import (
    CleanupWarningData,
    CompletionReviewData,
    ErrorData,
    Event,
    FinalData,
    RouteData,
    RunStartedData,
    Stage,
    ToolUncertainData,
    UserData,
)
from protocol.messages import Message
from protocol.text import shown_name

if TYPE_CHECKING:
    from kernel.store.session import Session
    from kernel.supervision.models import Models
    from kernel.supervision.tools import Tools

LISTING_LIMIT = 200
AUTO_COMPACT_EVENTS = 2000  # records since the last checkpoint that end a run with a new one
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".jmp", ".mypy_cache"}


ACK_WITH_COMPACT = (
    "--compact and --ack-interrupted do not combine: acknowledge first "
    "(--session ID --ack-interrupted), then compact (--session ID --compact)"
)
ANSWERED = ("completed", "needs_input")  # the request got its answer or its question


def needs_models(session: Session, prompt: str | None, compact: bool) -> bool:
    """False for runs that call no model: --compact, or the replay of a saved answer."""
    if compact:
        return False
    return prompt is not None or saved_answer(session.events) is None


def saved_answer(events: list[Event]) -> FinalData | None:
    """The latest request's answer (completed) or question (needs_input), if it has one.

    A request that was answered stays answered until the next prompt: a later `blocked` final
    written only to record uncertainty (no run_started) does not reopen it. Without a new
    prompt such a request is replayed, never run again (issue 9, item 1).
    """
    answer: FinalData | None = None
    for event in events:
        data = event.data
        if isinstance(data, UserData | RunStartedData):
            answer = None
        elif isinstance(data, FinalData) and data.status in ANSWERED:
            answer = data
    return answer


def workspace_listing(root: Path, limit: int = LISTING_LIMIT) -> tuple[list[str], bool]:
    """Up to `limit` workspace paths (dirs end in /), breadth first, skipping tool caches."""
    found: list[str] = []
    queue = [root]
    while queue:
        current = queue.pop(0)
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIP_DIRS:
                continue
            rel = os.path.relpath(entry.path, root)
            is_dir = entry.is_dir(follow_symlinks=False)
            if len(found) >= limit:
                return found, True
            shown = shown_name(rel)  # a name that is not UTF-8 is shown escaped (\\xNN)
            found.append(shown + "/" if is_dir else shown)
            if is_dir:
                queue.append(Path(entry.path))
    return found, False


class Agent:
    """One session's agent. `run` is synchronous; `close` releases workers and the lock."""

    def __init__(
        self,
        session: Session,
        models: Models,
        tools: Tools,
        policy: ContextPolicy | None = None,
        instructions: str = "",
        cancel: threading.Event | None = None,
    ) -> None:
        self.session = session
        self.models = models
        self.tools = tools
        self.policy = policy or ContextPolicy.from_settings(
            models.settings.jev_context_bytes, models.settings.flash_context_bytes
        )
        self.instructions = instructions
        self.cancel = cancel or threading.Event()
        # One redactor for every stream: the tool worker's output passes the session's.
        session.redactor.add(*getattr(tools.servers, "secrets", ()))
        tools.redactor = session.redactor
        self.step = ToolStep(session, models, tools, self.policy, instructions, self.cancel)

    # --- public ---------------------------------------------------------------------

    def run(
        self, prompt: str | None = None, compact: bool = False, acknowledge_pending: bool = False
    ) -> dict[str, Any]:
        """Run until a final status; returns {session_id, status, summary, session_dir}."""
        events = self.session.events
        replays = prompt is None and not compact and saved_answer(events) is not None
        if self.session.read_only and not (replays and not pending.unsettled(events)):
            raise read_only_error(self.session)
        if compact:
            if prompt is not None:
                raise UsageError("--compact takes no prompt")
            if acknowledge_pending:
                raise UsageError(ACK_WITH_COMPACT)
            return self._result("compacted", self._compact())
        if prompt is None:
            replay = self._replay(acknowledge_pending)
            if replay is not None:
                return replay
        else:
            prompt = admit.clean(prompt)
            admit.check(self.policy, self.session.events, prompt)  # before anything is written
        if not self.session.workspace.is_dir():
            raise StorageError(
                f"the workspace {self.session.workspace} of session {self.session.id} does not "
                "exist any more (deleted or moved); nothing was run or recorded"
            )
        end = self._run(prompt, acknowledge_pending)
        self._compact_if_long()
        return self._result(end.status, end.summary)

    def close(self) -> None:
        """Release workers and the session lock; safe to call twice, even if a worker resists."""
        try:
            for part in (self.models, self.tools):
                try:
                    part.close()
                except Exception as exc:  # the lock is released whatever the workers do
                    self.session.emit(
                        CleanupWarningData(
                            error_class=type(exc).__name__,
                            message=self.session.redactor.text(str(exc)),
                        )
                    )
        finally:
            self.session.close()

    # --- the run --------------------------------------------------------------------

    def _replay(self, acknowledge: bool) -> dict[str, Any] | None:
        """No prompt: the saved answer, or None when the request is unfinished (retry).

        Nothing re-runs: an answered request is replayed whatever the flags say; interrupted
        calls are acknowledged first when asked, and recorded (then `blocked`) when not.
        """
        events = self.session.events
        if not any(isinstance(e.data, UserData) for e in events):
            raise UsageError("this session has no request yet: give a prompt")
        answer = saved_answer(events)
        if answer is None:
            return None  # blocked, error, cancelled or killed: inference retries
        if pending.unsettled(events):
            if not acknowledge:
                return None  # _run records the uncertainty and ends blocked, running nothing
            self._settle_interrupted(True)
        return self._result(answer.status, answer.summary)

    def _result(self, status: str, summary: str) -> dict[str, Any]:
        return {
            "session_id": self.session.id,
            "status": status,
            "summary": summary,
            "session_dir": str(self.session.directory),
        }

    def _run(self, prompt: str | None, acknowledge: bool) -> RunEnded:
        """The one place a run's `final` is written: every ending arrives here as RunEnded.

        Anything else (a ContextOverflow for the answer, a storage error) propagates with no
        `final`, as a JmpError the front end reports.
        """
        try:
            self._begin(prompt, acknowledge)
            self._loop()
        except RunEnded as end:
            summary = self.session.redactor.text(end.summary)
            self.session.append(FinalData(status=end.status, summary=summary))
            return end

    def _begin(self, prompt: str | None, acknowledge: bool) -> None:
        """Settle interrupted calls, record the request and `run_started` (or end blocked)."""
        blocked = self._settle_interrupted(acknowledge)
        if prompt is not None:
            self.session.append(UserData(text=prompt))
        if blocked:
            raise RunEnded("blocked", blocked)
        self.tools.start()  # warm the tool worker (openhands import) while Jev routes
        self.models.start()
        listing, truncated = workspace_listing(self.session.workspace)
        self.session.append(
            RunStartedData(
                model=self.models.settings.flash_model,
                router_model=self.models.settings.jev_model,
                thinking=False,
                workspace=str(self.session.workspace),
                listing=listing,
                listing_truncated=truncated,
                resumed=prompt is None,
            )
        )

    def _settle_interrupted(self, acknowledge: bool) -> str:
        """Record kernel_exit uncertainty once per call; acknowledge if asked. '' = go on."""
        waiting: list[str] = []
        for record in pending.unsettled(self.session.events):
            cause = record.uncertain.cause if record.uncertain else "kernel_exit"
            if record.uncertain is None or acknowledge:
                self.session.append(
                    ToolUncertainData(
                        call_id=record.call_id,
                        tool=record.started.tool,
                        target=record.started.target,
                        cause=cause,
                        acknowledged=acknowledge,
                        note=_uncertain_note(acknowledge),
                    ),
                    durable=True,
                )
            if not acknowledge:
                waiting.append(f"{record.started.tool} {record.started.target!r}")
        if not waiting:
            return ""
        return (
            "Interrupted calls have an unknown outcome: "
            + ", ".join(waiting)
            + ". Check their effect, then continue with --ack-interrupted (nothing is re-run)."
        )

    def _loop(self) -> NoReturn:
        """Route and step until the run ends; a cancel or a worker's failure ends it here."""
        try:
            self._steps()
        except Cancelled as exc:
            raise RunEnded("cancelled", "Cancelled by the user.") from exc
        except (WorkerFailed, WorkerDied) as exc:  # e.g. the tool worker could not start
            self._error("tool", exc)
            raise RunEnded("error", str(exc)) from exc

    def _steps(self) -> NoReturn:
        exclude_done = False
        while True:
            if self.cancel.is_set():
                raise Cancelled("cancelled between steps")
            choice = self._route(exclude_done)
            exclude_done = False
            if choice == "done":
                verdict = self._review()
                if verdict == "complete":
                    self._respond("respond")
                if verdict == "blocked":
                    raise RunEnded("blocked", "Jev's completion review judged the request blocked.")
                exclude_done = True
                continue
            if choice == "ask":
                self._respond("ask")
            self.step.run(choice)  # returns to route again, or raises RunEnded

    # --- routing --------------------------------------------------------------------

    def _options(self, exclude_done: bool) -> dict[str, str]:
        mcp = {spec.name: spec.description or spec.name for spec in self.step.mcp_specs()}
        options = prompts.route_options(mcp)
        if exclude_done:
            del options["done"]
        return options

    def _state(self, reserved: int) -> tuple[str, int]:
        try:
            projection = self.step.project("router", reserved)
        except ContextOverflow as exc:
            self._error("route", exc)
            raise RunEnded("blocked", str(exc)) from exc
        return projection.text, projection.bytes

    def _ask_jev(self, stage: Stage, question: str, options: dict[str, str]) -> Any:
        reserved = prompts.reserved_bytes(question, options)
        state, size = self._state(reserved)
        try:
            routed = self.models.route(stage, question, options, state, cancel=self.cancel)
        except (WorkerFailed, WorkerDied) as exc:
            self._error(stage, exc)
            raise RunEnded("error", f"The {stage} request failed: {exc}") from exc
        return routed, size

    def _route(self, exclude_done: bool) -> str:
        options = self._options(exclude_done)
        routed, size = self._ask_jev("route", prompts.ROUTE_QUESTION, options)
        floor = self.models.settings.route_floor
        self.session.append(
            RouteData(
                choice=routed.choice,
                confidence=routed.confidence,
                context_bytes=size,
                probabilities=dict(routed.probabilities),
                offered=list(options),
                floor=floor,
                model=routed.usage.model,
            )
        )
        if routed.choice not in options:
            raise RunEnded("error", f"Jev chose {routed.choice!r}, which was not offered.")
        if routed.confidence < floor:
            ranked = sorted(routed.probabilities.items(), key=lambda kv: -kv[1])[:3]
            shown = ", ".join(f"{k} {v:.2f}" for k, v in ranked)
            raise RunEnded(
                "needs_input",
                f"Not sure what to do next (confidence {routed.confidence:.2f} is below the "
                f"floor {floor:.2f}; {shown}). Please clarify the request.",
            )
        return str(routed.choice)

    def _review(self) -> str:
        routed, size = self._ask_jev(
            "completion_review", prompts.REVIEW_QUESTION, dict(prompts.REVIEW_OPTIONS)
        )
        self.session.append(
            CompletionReviewData(
                choice=routed.choice,
                confidence=routed.confidence,
                context_bytes=size,
                probabilities=dict(routed.probabilities),
                model=routed.usage.model,
            )
        )
        return str(routed.choice)

    # --- answers --------------------------------------------------------------------

    def _respond(self, purpose: str) -> NoReturn:
        task = prompts.ASK_TASK if purpose == "ask" else prompts.RESPOND_TASK
        projection = self.step.project("generator", len((self.instructions + task).encode()))
        messages = [
            Message(role="system", content=self.instructions),
            Message(role="user", content=projection.text + "\n\n" + task),
        ]
        try:
            reply = self.models.generate("respond", messages, None, cancel=self.cancel)
        except (WorkerFailed, WorkerDied) as exc:
            if isinstance(exc, WorkerFailed) and exc.code == "cancelled":
                raise Cancelled(str(exc)) from exc
            self._error("respond", exc)
            raise RunEnded("error", f"The answer could not be written: {exc}") from exc
        text = reply.text.strip() or "(no answer text)"
        raise RunEnded("needs_input" if purpose == "ask" else "completed", text)

    def _error(self, stage: str, exc: BaseException) -> None:
        error_class = getattr(exc, "error_class", "") or type(exc).__name__
        self.session.append(
            ErrorData(
                stage=stage, error_class=error_class, message=self.session.redactor.text(str(exc))
            )
        )

    def _compact_if_long(self) -> None:
        """Checkpoint after a run when the log has grown long since the last checkpoint, so the
        next open folds the working set, not the history (local, no model call)."""
        since = 0
        for event in reversed(self.session.events):
            if event.kind == "compaction":
                break
            since += 1
        if since >= AUTO_COMPACT_EVENTS:
            from kernel.context.compact import compact

            compact(self.session, self.policy)

    def _compact(self) -> str:
        from kernel.context.compact import compact

        written = compact(self.session, self.policy)
        return f"Compacted locally: {len(written)} checkpoint(s), no model call."


def read_only_error(session: Session) -> StorageError:
    """Only the replay of a completed answer works on storage that refuses writes."""
    return StorageError(
        f"the session directory {session.directory} is read-only (or not writable by this "
        "user): only the replay of a completed answer works here; nothing was written"
    )


def _uncertain_note(acknowledged: bool) -> str:
    if acknowledged:
        return "Acknowledged by the user: outcome still unknown; not re-run, not assumed done."
    return "The call started and has no recorded end: its effect is unknown. Nothing re-ran it."
