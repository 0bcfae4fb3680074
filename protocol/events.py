"""Event-log records (docs/CONTRACT.md section 5): the envelope and one data struct per kind.

The envelope is `{"version", "session_id", "seq", "time", "kind", "data"}`; jev-harness's own
kinds are in protocol/harness_events.py, their base in protocol/event_base.py. Data structs omit
`forbid_unknown_fields` and give every field added after v1 a default, so that later builds
still read old logs and old builds skip what they do not know.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from protocol.event_base import Data as Data
from protocol.harness_events import ParameterData as ParameterData
from protocol.harness_events import ReceiptData as ReceiptData
from protocol.harness_events import TaskData as TaskData

EVENT_VERSION = 1

Stage = Literal["route", "completion_review", "generate", "respond", "tool", "compaction", "recall"]
RunStatus = Literal["completed", "needs_input", "blocked", "cancelled", "error", "compacted"]
ToolStatus = Literal["ok", "error"]
# worker_exit: the kernel saw the tool worker (or an MCP server) die mid-call; kernel_exit: a
# later run found the call with no end (jmp itself was stopped); cancelled: the call's own end
# says the person stopped it (Ctrl+C, the cancel Event) before it finished.
UncertainCause = Literal["worker_exit", "kernel_exit", "cancelled"]

ApprovalDecision = Literal["allowed", "rejected", "cancelled"]
ApprovalScope = Literal["once", "session"]
SessionMode = Literal["auto", "ask"]  # ACP session modes (acp_server/modes.py)

# Kinds that the CLI prints with `seq: null` and that never reach events.jsonl.
TRANSIENT_KINDS = frozenset({"model_progress", "tool_progress", "cleanup_warning"})


class SessionData(Data):
    """First record of a session: the workspace it is bound to, for good."""

    session_id: str
    workspace: str
    created_by: str = "jmp"  # "jmp", or "jev-harness" for a task-script run


class UserData(Data):
    """A user request, verbatim except for redaction."""

    text: str


class RunStartedData(Data):
    """One run began (an agent's or a harness task's): which models, and what the workspace
    held. Fsynced, with the request before it, before the run's first step."""

    model: str
    router_model: str = ""
    thinking: bool = False
    workspace: str = ""
    listing: list[str] = msgspec.field(default_factory=list)
    listing_truncated: bool = False
    resumed: bool = False


class RouteData(Data):
    """Jev's routing decision over the offered tool names (jev-harness: the tool question)."""

    choice: str
    confidence: float
    context_bytes: int
    probabilities: dict[str, float]
    offered: list[str] = msgspec.field(default_factory=list)
    floor: float = 0.35
    model: str = ""
    question: str = "route"  # jev-harness: "tool"
    selection: str = ""  # jev-harness: "match" or "explore"; "" for jmp routes
    top: float | None = None  # highest returned probability
    margin: float | None = None  # top minus the second highest
    accepted: bool = True  # the selection policy accepted the choice
    method: str = "jev"  # "jev", "single_option" (chosen in code) or "caller" (direct use)


class CompletionReviewData(Data):
    """Jev's answer to `completion_review` after a proposed `done`."""

    choice: str
    confidence: float
    context_bytes: int
    probabilities: dict[str, float]
    model: str = ""


class ModelStartedData(Data):
    """A model request is about to leave (written before the request is sent)."""

    stage: Stage
    model: str
    provider: str = ""


class ModelProgressData(Data):
    """Transient streaming progress: character counts only, never the text."""

    stage: Stage
    characters: int
    model: str = ""


class ToolProgressData(Data):
    """Transient heartbeat of a tool call still running: how long it has run so far. Emitted
    every JMP_HEARTBEAT_S seconds (10 by default) between `tool_started` and the call's end;
    never in the log, never in a model's context."""

    call_id: str
    tool: str
    elapsed_s: float


class UsageData(Data):
    """One finished model call: provider-reported usage and wall seconds."""

    provider: str
    stage: Stage
    model: str
    seconds: float
    usage: dict[str, Any] = msgspec.field(default_factory=dict)


class ArgumentOffloadData(Data):
    """Arguments were built in code because the selected schema fixes every value."""

    tool: str
    policy: str
    backend: str = "code"
    generation_call_skipped: bool = True
    generator: str = ""
    flash_call_skipped: bool = True
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class ApprovalData(Data):
    """The person's answer to "may this call run?", written before its `tool_started`; a
    rejected or cancelled call never starts. Only a front end that asks writes it (ACP's `ask`
    mode, before each effect); the CLI never asks."""

    call_id: str
    tool: str
    target: str
    decision: ApprovalDecision
    scope: ApprovalScope = "once"  # "session": the person allowed this tool for the session
    asked: bool = True  # False: an earlier "always for this session" answered, not the person


class ModeData(Data):
    """A front end's session mode was set (ACP `session/set_mode`): `auto` runs effects
    unasked (the CLI's behaviour), `ask` asks before each effect. Kept so that a new process
    on the session keeps asking."""

    mode: SessionMode
    front_end: str = "acp"


class ToolStartedData(Data):
    """Written and fsynced before the tool can have any effect."""

    call_id: str
    tool: str
    target: str
    request: str  # artifact path, relative to the session directory
    arguments: str = ""  # redacted preview


class ToolFinishedData(Data):
    """The tool returned. `status=ok` means no tool error, not that the goal was met. A call of
    a tool that only observes (`read`, `recall`) ends here too when its worker died or a cancel
    stopped it (`reason` "worker_exit" or "cancelled"), or when the next open finds it with no
    end ("kernel_exit"): `status=error`, `interrupted`; it changed nothing, so it is never
    `tool_uncertain` and needs no acknowledgement."""

    call_id: str
    tool: str
    status: ToolStatus
    exit_code: int | None = None  # -1: an unfinished shell command, never success
    text: str = ""  # preview
    arguments: str = ""  # preview
    artifact: str = ""  # result artifact (JSON), relative to the session directory
    full_output: str = ""  # plain-text output artifact, relative to the session directory
    target: str = ""
    seconds: float = 0.0
    truncated: bool = False
    error: str = ""
    # Set by the tool worker, a fact rather than a guess from exit_code: the shell command was
    # stopped before it finished (then exit_code is -1, whatever the shell said after C-c).
    interrupted: bool = False  # stopped before it finished (Ctrl+C/cancel or a limit)
    # "timeout", "output_cap": its tree was killed; "worker_exit", "kernel_exit": a read that
    # its worker's or kernel's death ended (it changed nothing: docs/DECISIONS.md "Tools")
    reason: str = ""  # why: "cancelled", "timeout", "output_cap", "worker_exit", "kernel_exit"
    # What a person is shown when it differs from `text` (preview): a shell command's output
    # without the notes for the model, the text a read returned, a unified diff of a write or
    # an edit. Absent: show `text`.
    display: str = ""


class ToolUncertainData(Data):
    """A call began and what it did is unknown: it has no end, or its end says it was stopped
    before it finished (`cause` says how). Only the kernel writes this. Never for a call that
    only observes (`read`, `recall`): that one ends failed instead (see `tool_finished`)."""

    call_id: str
    tool: str
    cause: UncertainCause
    acknowledged: bool
    note: str
    target: str = ""
    signal: int | None = None
    exit_code: int | None = None
    mcp_server: bool = False  # worker_exit: an MCP server died mid-call, not the tool worker


class CompactionData(Data):
    """A deterministic context checkpoint was written."""

    audience: str
    through: int
    checkpoint: str
    method: str = "deterministic"


class FinalData(Data):
    """A run ended with this status; `summary` is the answer, question or reason."""

    status: RunStatus
    summary: str


class ErrorData(Data):
    """Something failed; the message is redacted."""

    stage: str
    error_class: str
    message: str


class CleanupWarningData(Data):
    """Transient: a worker or file could not be cleaned up as planned."""

    error_class: str
    message: str = ""


DATA_TYPES: dict[str, type[Data]] = {
    "session": SessionData,
    "user": UserData,
    "run_started": RunStartedData,
    "route": RouteData,
    "task": TaskData,
    "parameter": ParameterData,
    "receipt": ReceiptData,
    "completion_review": CompletionReviewData,
    "model_started": ModelStartedData,
    "model_progress": ModelProgressData,
    "tool_progress": ToolProgressData,
    "usage": UsageData,
    "argument_offload": ArgumentOffloadData,
    "approval": ApprovalData,
    "mode": ModeData,
    "tool_started": ToolStartedData,
    "tool_finished": ToolFinishedData,
    "tool_uncertain": ToolUncertainData,
    "compaction": CompactionData,
    "final": FinalData,
    "error": ErrorData,
    "cleanup_warning": CleanupWarningData,
}
KIND_OF: dict[type[Data], str] = {cls: kind for kind, cls in DATA_TYPES.items()}


class Event(msgspec.Struct, kw_only=True):
    """One line of events.jsonl. `data` is a typed struct, or a dict for an unknown kind."""

    version: int = EVENT_VERSION
    session_id: str
    seq: int | None
    time: float | None
    kind: str
    data: Any

    @property
    def known(self) -> bool:
        return self.kind in DATA_TYPES
