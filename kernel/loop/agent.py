"""The agent loop: route with Jev, review `done`, generate or offload arguments, run tools.

States of one run (`Agent.run`):
  PREPARE  record uncertain calls, the request, run_started -> blocked if unsettled
           (kernel/loop/resume.py)
  ROUTE    Jev picks a label (kernel/loop/routing.py)    -> needs_input below the floor
  REVIEW   a proposed `done` gets completion_review -> RESPOND / ROUTE without done / blocked
  STEP     a tool call (kernel/loop/steps.py)            -> ROUTE, or blocked on uncertainty
  RESPOND  Flash writes the answer (or `ask`)       -> completed / needs_input
Every way a run ends raises RunEnded (kernel/run/ledger.py); `_run` alone catches it and has the
run's ledger write its one `final` event. The lock and the workers are released by `close()`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from kernel.context.policy import ContextPolicy
from kernel.errors import StorageError, UsageError
from kernel.loop import admit, prompts
from kernel.loop.approval import Approve
from kernel.loop.context_view import ContextView
from kernel.loop.listing import workspace_listing
from kernel.loop.resume import read_only_error, saved_answer, settle_interrupted
from kernel.loop.routing import Routing, record_error
from kernel.loop.steps import ToolStep
from kernel.run.ledger import RunEnded, crash_point
from kernel.store import pending
from kernel.supervision.supervisor import Cancelled, WorkerDied, WorkerFailed
from protocol.events import CleanupWarningData, RunStartedData, UserData
from protocol.messages import Message
from protocol.text import clean

if TYPE_CHECKING:
    from kernel.store.session import Session
    from kernel.supervision.models import Models
    from kernel.supervision.tools import Tools
    from protocol.results import RunResult

AUTO_COMPACT_EVENTS = 2000  # records since the last checkpoint that end a run with a new one


ACK_WITH_COMPACT = (
    "--compact and --ack-interrupted do not combine: acknowledge first "
    "(--session ID --ack-interrupted), then compact (--session ID --compact)"
)


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
        approve: Approve | None = None,
        on_answer: Callable[[int, str], None] | None = None,
    ) -> None:
        """`approve`: asked before each effect (kernel/loop/approval.py); `on_answer(offset,
        text)`: the answer's text as it streams, unredacted (Models.generate's `on_text`).
        Neither is the CLI's: without them a run is as the contract describes."""
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
        self.view = ContextView(session, self.policy)
        self.on_answer = on_answer
        self.step = ToolStep(
            session, models, tools, self.view, instructions, self.cancel, approve=approve
        )
        self.ledger = self.step.ledger  # the one ledger of this agent's runs
        self.routing = Routing(session, models, self.view, self.step.mcp_specs, self.cancel)
        self._tools_starting: threading.Thread | None = None

    # --- public ---------------------------------------------------------------------

    def run(
        self, prompt: str | None = None, compact: bool = False, acknowledge_pending: bool = False
    ) -> dict[str, Any]:
        """Run until a final status; returns {session_id, status, summary, session_dir} (the
        summary redacted, as every front end shows it).

        Every record of the run is fsynced and announced before it returns."""
        result = self._request(prompt, compact, acknowledge_pending)
        self.session.sync()
        return result

    def _request(
        self, prompt: str | None, compact: bool, acknowledge_pending: bool
    ) -> dict[str, Any]:
        events = self.session.events
        replays = prompt is None and not compact and saved_answer(events) is not None
        if self.session.read_only and not (replays and not pending.unsettled(events)):
            raise read_only_error(self.session)
        if compact:
            if prompt is not None:
                raise UsageError("--compact takes no prompt")
            if acknowledge_pending:
                raise UsageError(ACK_WITH_COMPACT)
            return self.ledger.result("compacted", self._compact()).to_dict()
        if prompt is None:
            replay = self._replay(acknowledge_pending)
            if replay is not None:
                return replay
        else:
            prompt = clean(prompt)
            admit.check(self.policy, self.session.events, prompt)  # before anything is written
        if not self.session.workspace.is_dir():
            raise StorageError(
                f"the workspace {self.session.workspace} of session {self.session.id} does not "
                "exist any more (deleted or moved); nothing was run or recorded"
            )
        result = self._run(prompt, acknowledge_pending)
        self._compact_if_long()
        return result.to_dict()

    def _start_tools(self) -> None:
        """`tools.start()` on a thread. Its first use takes the Tools lock, so waits for it; a
        start that failed here is tried again there, which reports the failure."""

        def start() -> None:
            with contextlib.suppress(Exception):  # reported by the retry at first use
                self.tools.start()

        self._tools_starting = threading.Thread(target=start, daemon=True, name="tools-start")
        self._tools_starting.start()

    def close(self) -> None:
        """Release workers and the session lock; safe to call twice, even if a worker resists."""
        if self._tools_starting is not None:
            self._tools_starting.join()  # else a worker started after close would outlive it
        try:
            for part in (self.models, self.tools):  # every worker is told at once: exits overlap
                with contextlib.suppress(Exception):
                    part.stop_soon()
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
            settle_interrupted(self.session, True)
        return self.ledger.result(answer.status, answer.summary).to_dict()

    def _run(self, prompt: str | None, acknowledge: bool) -> RunResult:
        """The one place a run's `final` is written: every ending arrives here as RunEnded.

        Anything else (a ContextOverflow for the answer, a storage error) propagates with no
        `final`, as a JmpError the front end reports.
        """
        try:
            self._begin(prompt, acknowledge)
            self._loop()
        except RunEnded as end:
            return self.ledger.end(end.status, end.summary)

    def _begin(self, prompt: str | None, acknowledge: bool) -> None:
        """Settle interrupted calls, record the request and `run_started` (or end blocked)."""
        blocked = settle_interrupted(self.session, acknowledge)
        if prompt is not None:
            self.session.append(UserData(text=prompt))
        if blocked:
            raise RunEnded("blocked", blocked)
        # The tool worker is asked for first (a cold OpenHands import, or a warm worker's shell
        # setup, is the longest start: it overlaps the route), but on a thread, so its spawn
        # stays off the path to the first route. The CLI has asked for the router already.
        self._start_tools()
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
            ),
            durable=True,  # with the request: a kill from here on leaves a run to settle
        )
        crash_point("after_run_started")

    def _loop(self) -> NoReturn:
        """Route and step until the run ends; a cancel or a worker's failure ends it here."""
        try:
            self._steps()
        except Cancelled as exc:
            raise RunEnded("cancelled", "Cancelled by the user.") from exc
        except (WorkerFailed, WorkerDied) as exc:  # e.g. the tool worker could not start
            record_error(self.session, "tool", exc)
            raise RunEnded("error", str(exc)) from exc

    def _steps(self) -> NoReturn:
        exclude_done = False
        while True:
            if self.cancel.is_set():
                raise Cancelled("cancelled between steps")
            choice = self.routing.route(exclude_done)
            exclude_done = False
            if choice == "done":
                verdict = self.routing.review()
                if verdict == "complete":
                    self._respond("respond")
                if verdict == "blocked":
                    raise RunEnded("blocked", "Jev's completion review judged the request blocked.")
                exclude_done = True
                continue
            if choice == "ask":
                self._respond("ask")
            self.step.run(choice)  # returns to route again, or raises RunEnded

    # --- answers --------------------------------------------------------------------

    def _respond(self, purpose: str) -> NoReturn:
        task = prompts.ASK_TASK if purpose == "ask" else prompts.RESPOND_TASK
        projection = self.view.project("generator", len((self.instructions + task).encode()))
        messages = [
            Message(role="system", content=self.instructions),
            Message(role="user", content=projection.text + "\n\n" + task),
        ]
        try:
            reply = self.models.generate(
                "respond", messages, None, cancel=self.cancel, on_text=self.on_answer
            )
        except (WorkerFailed, WorkerDied) as exc:
            if isinstance(exc, WorkerFailed) and exc.code == "cancelled":
                raise Cancelled(str(exc)) from exc
            record_error(self.session, "respond", exc)
            raise RunEnded("error", f"The answer could not be written: {exc}") from exc
        text = reply.text.strip() or "(no answer text)"
        raise RunEnded("needs_input" if purpose == "ask" else "completed", text)

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
