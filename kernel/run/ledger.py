"""The ledger of one run: each call's records and the run's end, whatever decides the steps.

A call, in order (the crash points are where JMP_CRASH_AT kills the kernel in tests):

  open       the request artifact, fsynced (`tool_started` will name it); the target and the
             arguments previewed for the records: redacted first, then cut, so a cut never
             leaves a prefix of a key the redactor cannot match
  start      crash point before_tool_started; `tool_started`, fsynced before the call can have
             any effect (persist before effect); crash point after_tool_started
  finish     crash point after_tool_result; the output and result artifacts, then
             `tool_finished`: the session's group commit fsyncs the artifacts before it writes
             the record naming them, and announces the record once an fsync covered it
  uncertain  `tool_uncertain`, fsynced, for every cause: the kernel saw the worker (or an MCP
             server) die mid-call (worker_exit); a later process found the call with no end
             (kernel_exit, by `settle`). The call is never re-run. A call that only observes
             (read, recall: protocol/catalog.py) is never uncertain: `settle` gives one with
             no end a failed `tool_finished` instead (it had no effect)

And the run: `end` writes its one `final`, syncs, and gives its result record (`result` gives
one for a run that writes no final: a replay, a compaction). `RunEnded` is how a deciding loop
says the run ends here. Nothing here decides a step or re-runs a call.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from kernel.store import pending
from protocol.catalog import effect_of
from protocol.events import (
    FinalData,
    RunStatus,
    ToolFinishedData,
    ToolStartedData,
    ToolStatus,
    ToolUncertainData,
    UncertainCause,
)
from protocol.results import RunResult

if TYPE_CHECKING:
    from kernel.store.session import Session

PREVIEW_CHARS = 2000  # the output in `tool_finished`; the whole is in the output artifact
ARGUMENTS_PREVIEW_CHARS = 600
# A target (a bash command is its own target) in events: the whole text is in the request
# artifact. Unbounded, a 10 MB heredoc was stored twice in the log and once per recall page.
TARGET_PREVIEW_CHARS = 600
ERROR_PREVIEW_CHARS = 2000


class RunEnded(Exception):
    """The run ends here with `status` and `summary` (completed and asked included).

    Raised wherever a run ends, however deep in a step; caught once by the loop that runs it,
    which hands it to `Ledger.end` for the run's one `final`. Not a JmpError: no front end
    ever sees it.
    """

    def __init__(self, status: RunStatus, summary: str) -> None:
        super().__init__(summary)
        self.status: RunStatus = status
        self.summary = summary


def crash_point(name: str) -> None:
    """Test-only: die by SIGKILL at an exact place when JMP_CRASH_AT names it."""
    if os.environ.get("JMP_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def preview(text: str, limit: int = PREVIEW_CHARS, where: str = "the full output") -> str:
    """A bounded preview, marked when cut; the full text lives in an artifact (`where`)."""
    if len(text) <= limit:
        return text
    place = f" in {where}" if where else " not kept"
    return text[:limit] + f"\n[... {len(text) - limit} more characters{place}]"


def shown_target(target: str) -> str:
    """A call's target as events carry it: bounded, the whole in the request artifact."""
    return preview(target, TARGET_PREVIEW_CHARS, "the request artifact")


def shown_display(outcome: Outcome, redact: Callable[[str], str]) -> str:
    """The readable view's `display` (redacted, bounded); "" when it is the text itself."""
    same = not outcome.display or outcome.display == outcome.text
    return "" if same else preview(redact(outcome.display), PREVIEW_CHARS, "the result artifact")


@dataclass(frozen=True)
class Call:
    """A call the ledger has opened: its id, and what its records show (redacted, bounded).
    `arguments` are the call's own (unredacted: what runs); `shown_arguments` the preview."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    target: str
    shown_arguments: str
    request: str  # the request artifact, relative to the session directory


@dataclass(frozen=True)
class Outcome:
    """How a call ended, as its worker answered. `text` is the whole output (the output
    artifact), `result` the result artifact's content; `target` replaces the call's own in
    `tool_finished` when the call resolved it (a harness operation's fetched URL)."""

    status: ToolStatus
    text: str
    result: Any
    error: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    interrupted: bool = False
    reason: str = ""
    target: str = ""
    display: str = ""  # the readable view's text, when it is not `text` (a diff, say)


class Ledger:
    """The records of one open session's runs. One call at a time, from one thread."""

    def __init__(self, session: Session) -> None:
        self.session = session

    # --- a call -------------------------------------------------------------------------

    def open(self, tool: str, arguments: Mapping[str, Any], target: str) -> Call:
        """A new call: its id and request artifact (fsynced); no record is written yet."""
        call_id = uuid.uuid4().hex[:16]
        request = self.session.artifacts.write_json(
            f"{call_id}.request.json",
            {"call_id": call_id, "tool": tool, "arguments": dict(arguments), "target": target},
        )
        redact = self.session.redactor.text
        # Redacted before the cut: a cut through a key would leave a prefix the redactor misses.
        text = redact(json.dumps(dict(arguments), ensure_ascii=False))
        return Call(
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            target=shown_target(redact(target)),
            shown_arguments=preview(text, ARGUMENTS_PREVIEW_CHARS, "the request artifact"),
            request=request,
        )

    def start(self, call: Call) -> None:
        """`tool_started`, fsynced: from here on a kill leaves a pending call, never a guess.
        The caller sends the call to its worker only after this returns."""
        crash_point("before_tool_started")
        self.session.append(
            ToolStartedData(
                call_id=call.call_id,
                tool=call.tool,
                target=call.target,
                request=call.request,
                arguments=call.shown_arguments,
            ),
            durable=True,  # before any effect: a kill from here on leaves a pending call
        )
        crash_point("after_tool_started")

    def finish(self, call: Call, outcome: Outcome) -> None:
        """The output and result artifacts, then `tool_finished` (previews redacted, then cut)."""
        crash_point("after_tool_result")
        artifacts, redact = self.session.artifacts, self.session.redactor.text
        # Both fsynced by the session's commit before `tool_finished`, which names them, is written.
        output = artifacts.write_text(f"{call.call_id}.output.txt", outcome.text)
        saved = artifacts.write_json(f"{call.call_id}.result.json", outcome.result)
        self.session.append(
            ToolFinishedData(
                call_id=call.call_id,
                tool=call.tool,
                status=outcome.status,
                exit_code=outcome.exit_code,
                text=preview(redact(outcome.text)),
                arguments=call.shown_arguments,
                artifact=saved,
                full_output=output,
                target=shown_target(redact(outcome.target)) if outcome.target else call.target,
                seconds=round(outcome.seconds, 6),
                truncated=len(outcome.text) > PREVIEW_CHARS,
                error=preview(redact(outcome.error), ERROR_PREVIEW_CHARS),
                interrupted=outcome.interrupted,
                reason=outcome.reason,
                display=shown_display(outcome, redact),
            )
        )

    def uncertain(
        self,
        call: Call,
        why: str,
        *,
        signal: int | None = None,
        exit_code: int | None = None,
        mcp_server: bool = False,
        cause: UncertainCause = "worker_exit",
    ) -> None:
        """`tool_uncertain` (not acknowledged), fsynced: the kernel saw what ran the call die
        before it answered (`why` says what died; `signal` and `exit_code` how, or
        `mcp_server`), or saw a cancel stop a call that does not say how far it got (cause
        `cancelled`). The call has no end and is never re-run."""
        self._uncertain(
            call.call_id,
            call.tool,
            call.target,
            cause,
            acknowledged=False,
            note=pending.NOTES[cause].format(why=why),
            signal=signal,
            exit_code=exit_code,
            mcp_server=mcp_server,
        )

    # --- reopening ----------------------------------------------------------------------

    def settle(self, acknowledge: bool = False) -> list[pending.CallRecord]:
        """On reopening: record once, fsynced, the uncertainty of each call whose outcome is
        unknown and not yet acknowledged (its cause: `pending.cause_of`), or
        acknowledge each when asked. Returns the calls still waiting (none when
        acknowledged), as they were before this: `uncertain` is None for those just recorded."""
        waiting: list[pending.CallRecord] = []
        for record in pending.unsettled(self.session.events):
            if record.finished is None and effect_of(record.started.tool) == "observes":
                self._observed_without_end(record)  # a read changed nothing: it failed
                continue
            recorded = record.uncertain
            cause = pending.cause_of(record)  # kernel_exit, or cancelled: the call's end says
            if recorded is None or acknowledge:
                self._uncertain(
                    record.call_id,
                    record.started.tool,
                    record.started.target,
                    cause,
                    acknowledged=acknowledge,
                    note=pending.NOTES["acknowledged" if acknowledge else cause].format(
                        why=pending.CANCELLED_WHY
                    ),
                    mcp_server=bool(recorded is not None and recorded.mcp_server),
                )
            if not acknowledge:
                waiting.append(record)
        return waiting

    def _observed_without_end(self, record: pending.CallRecord) -> None:
        """The end of a call that only observes (read, recall) and has none (its kernel or
        worker died during it): failed, `reason` kernel_exit (or the uncertainty already
        recorded), never waited on, for it had no effect."""
        started = record.started
        why = record.uncertain.cause if record.uncertain is not None else "kernel_exit"
        text = (
            f"{started.tool} has no recorded end ({why}): it changes nothing, so nothing is "
            "uncertain, and nothing re-ran it."
        )
        call = Call(
            call_id=started.call_id,
            tool=started.tool,
            arguments={},
            target=started.target,
            shown_arguments=started.arguments,
            request=started.request,
        )
        done = {"status": "error", "text": text}
        self.finish(
            call,
            Outcome(
                status="error", text=text, result=done, error=text, interrupted=True, reason=why
            ),
        )

    def _uncertain(
        self,
        call_id: str,
        tool: str,
        target: str,
        cause: UncertainCause,
        **fields: Any,
    ) -> None:
        """The one writer of `tool_uncertain`, fsynced (a kill right after keeps it, and it is
        never written twice)."""
        data = ToolUncertainData(call_id=call_id, tool=tool, target=target, cause=cause, **fields)
        self.session.append(data, durable=True)

    # --- the run's end ------------------------------------------------------------------

    def end(
        self,
        status: RunStatus,
        summary: str,
        artifact: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> RunResult:
        """The run's one `final`, and its result record, given once every record of the run
        is fsynced and announced."""
        self.session.append(FinalData(status=status, summary=summary))
        self.session.sync()
        return self.result(status, summary, artifact)

    def result(
        self,
        status: RunStatus,
        summary: str,
        artifact: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> RunResult:
        """The result record: summary redacted (a caller of the Python API gets no key either),
        the harness's receipt (`artifact`) too."""
        redactor = self.session.redactor
        if isinstance(artifact, dict):
            artifact = redactor.value(artifact)
        return RunResult(
            session_id=self.session.id,
            status=status,
            summary=redactor.text(summary),
            session_dir=str(self.session.directory),
            artifact=artifact,
        )
