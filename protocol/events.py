"""Event-log records (CONTRACT.md section 5): the envelope and one data struct per kind.

The envelope is `{"version", "session_id", "seq", "time", "kind", "data"}`. Data structs omit
`forbid_unknown_fields` and give every field added after v1 a default, so that later builds
still read old logs and old builds skip what they do not know.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

EVENT_VERSION = 1

Stage = Literal["route", "completion_review", "generate", "respond", "tool", "compaction", "recall"]
RunStatus = Literal["completed", "needs_input", "blocked", "cancelled", "error", "compacted"]
ToolStatus = Literal["ok", "error"]
UncertainCause = Literal["worker_exit", "kernel_exit"]

# Kinds that the CLI prints with `seq: null` and that never reach events.jsonl.
TRANSIENT_KINDS = frozenset({"model_progress", "cleanup_warning"})


class Data(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Base of every event's `data`. Unknown fields are ignored on read."""


class SessionData(Data):
    """First record of a session: the workspace it is bound to, for good."""

    session_id: str
    workspace: str
    created_by: str = "jmp"  # "jmp", or "jev-harness" for a task-script run


class UserData(Data):
    """A user request, verbatim except for redaction."""

    text: str


class RunStartedData(Data):
    """One `Agent.run` began: which models, and what the workspace held."""

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


class TaskData(Data):
    """jev-harness: the task script of this session, its inputs (redacted) and its limits."""

    script: str  # absolute path
    sha256: str  # of the script's bytes when the run began
    inputs: dict[str, Any] = msgspec.field(default_factory=dict)
    context: Any = None
    max_steps: int = 20  # executed operations (the entry capture not counted)
    timeout_s: float = 120.0  # wall clock for the run
    limits: dict[str, Any] = msgspec.field(default_factory=dict)  # {max_steps, timeout_s} again
    toolkits: list[str] = msgspec.field(default_factory=list)
    tools: list[str] = msgspec.field(default_factory=list)
    labels: list[str] = msgspec.field(default_factory=list)
    output: str = ""  # the report's location, as the script gives it
    tool_selection: str = "match"
    direct_only: bool = False  # no delegation to Jev (no router, no key)


class ParameterData(Data):
    """jev-harness: one parameter chosen from its offered domain (or a page of it)."""

    tool: str
    parameter: str
    question: str  # "<tool>.<parameter>" or "<tool>.<parameter>.page"
    choice: str  # an option id, or "pageN"
    selection: str  # "match" or "explore"
    accepted: bool
    method: str  # "jev", "single_option" or "caller"
    probabilities: dict[str, float] = msgspec.field(default_factory=dict)  # the top eight
    top: float | None = None
    margin: float | None = None
    confidence: float | None = None  # Jev's own figure, recorded, never used for the policy
    offered: int = 0  # how many options the question offered
    domain: int = 0  # how many options the whole domain held
    context_bytes: int = 0
    model: str = ""


class ReceiptData(Data):
    """jev-harness: the artifact receipt after save_report, with the verifier's verdict."""

    call_id: str
    path: str  # absolute
    exists: bool
    match: bool  # the saved file equals the current records
    record_count: int
    digest: str | None  # hex sha256 of the file's bytes (null: no file)
    sources: list[str] = msgspec.field(default_factory=list)
    verdict: bool | None = None  # the script's verifier over the records


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


class ToolStartedData(Data):
    """Written and fsynced before the tool can have any effect."""

    call_id: str
    tool: str
    target: str
    request: str  # artifact path, relative to the session directory
    arguments: str = ""  # redacted preview


class ToolFinishedData(Data):
    """The tool returned. `status=ok` means no tool error, not that the goal was met."""

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
    reason: str = ""  # why: "cancelled" (Ctrl+C), "timeout" or "output_cap" (tree killed)
    # What a person is shown when it differs from `text` (preview): a shell command's output
    # without the notes for the model, the text a read returned, a unified diff of a write or
    # an edit. Absent: show `text`.
    display: str = ""


class ToolUncertainData(Data):
    """A call began and has no end; what it did is unknown. Only the kernel writes this."""

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
    "usage": UsageData,
    "argument_offload": ArgumentOffloadData,
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
