"""Kernel<->worker messages. Same build on both ends, so unknown fields are bugs.

Every request carries an `id`; every reply names the request it answers in `reply_to`.
Frames are msgpack `{"v": WIRE_VERSION, "body": <tagged message>}`; the tag is `kind`.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

import msgspec

WIRE_VERSION = 1
HEARTBEAT_MS = 200  # both sides send one at least this often while idle or busy

WorkerKind = Literal["router", "generator", "tool", "harness"]
FailCode = Literal[
    "bad_request",  # the frame or its fields are wrong (msgspec's path in detail)
    "unsupported_version",  # the frame's `v` is not WIRE_VERSION
    "invalid_arguments",  # tool arguments failed the native schema
    "provider",  # the model API failed after the SDK's own retries
    "cancelled",  # a Cancel stopped the request
    "timeout",  # the request's own time limit ran out
    "unknown_tool",  # a tool name the worker does not serve
    "effect_unknown",  # a tool's call was sent and its end was lost (an MCP server died)
    "internal",  # anything else the worker caught (error_class names it)
    "task",  # a task script failed to load or build (harness worker)
    "unoffered",  # a tool or option id that the task does not offer now (harness worker)
    "incomplete",  # a parameter missing or extra (harness worker)
]


class Msg(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="kind",
    tag=lambda name: "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_"),
    forbid_unknown_fields=True,
):
    """Kernel<->worker message."""


# Subclasses repeat `frozen=True`: msgspec inherits it anyway, but mypy needs it stated.


# --- kernel -> worker ------------------------------------------------------------


class Heartbeat(Msg, frozen=True):
    """Liveness, both directions. `busy` names the request a worker is working on."""

    pid: int
    busy: str | None = None


class Route(Msg, frozen=True):
    """Ask Jev one `choice` question: labels are exactly the keys of `options`."""

    id: str
    question: str  # "route" or "completion_review"
    instructions: str
    options: dict[str, str]  # label -> description
    state: str  # the router's context projection


class Message(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One chat message for the generator."""

    role: Literal["system", "user", "assistant"]
    content: str


class Generate(Msg, frozen=True):
    """Ask Flash: with `tool_schema`, forced `selected_action` arguments; without, prose."""

    id: str
    stage: Literal["generate", "respond"]
    messages: list[Message]
    tool_name: str | None = None
    tool_description: str = ""
    tool_schema: dict[str, Any] | None = None


class ListTools(Msg, frozen=True):
    """Ask the tool worker for its tools (built-in and MCP) with native schemas."""

    id: str


class Validate(Msg, frozen=True):
    """Check arguments against the native action type; no effect on anything."""

    id: str
    tool: str
    arguments: dict[str, Any]


class RunTool(Msg, frozen=True):
    """Execute one validated call. The kernel has fsynced tool_started before sending."""

    id: str  # the call_id
    tool: str
    arguments: dict[str, Any]
    timeout_s: float | None = None


class Cancel(Msg, frozen=True):
    """Stop the named request as soon as possible (a stream, or a running command)."""

    id: str


class Shutdown(Msg, frozen=True):
    """Exit now, taking every child along."""


ToWorker = Heartbeat | Route | Generate | ListTools | Validate | RunTool | Cancel | Shutdown


# --- worker -> kernel ------------------------------------------------------------


class Ready(Msg, frozen=True):
    """First message of a worker: who it is. The frame's `v` is the handshake."""

    pid: int
    worker: WorkerKind
    detail: str = ""


class Progress(Msg, frozen=True):
    """Streaming progress of a model request: character counts, and for an answer (a request
    with no tool, stage `respond`) its new text since the last Progress. Argument text never
    travels here, and no event carries `text` (`model_progress` is counts only)."""

    reply_to: str
    stage: str
    characters: int  # after this Progress's text
    text: str = ""  # answers only: characters[characters - len(text):characters]


class ToolProgress(Msg, frozen=True):
    """A running tool call's output so far, for a person watching it (the readable view):
    counts and the last lines only, sent while it grows. Never stored; the kernel's front end
    redacts `tail` before showing it, and the worker never cuts a word in it (protocol/text.py
    `head`, `tail`) so that no part of a secret escapes the redactor."""

    reply_to: str  # the call_id
    output_bytes: int
    output_lines: int
    tail: str = ""  # at most a few lines, plain text


class ModelUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Provider-reported usage of one model call."""

    provider: str
    model: str
    seconds: float
    usage: dict[str, Any] = msgspec.field(default_factory=dict)


class Routed(Msg, frozen=True):
    """Jev's answer: the argmax label, its confidence, and every label's probability."""

    reply_to: str
    choice: str
    confidence: float
    probabilities: dict[str, float]
    usage: ModelUsage


class Generated(Msg, frozen=True):
    """Flash's answer: parsed arguments (tool call) or text (prose)."""

    reply_to: str
    usage: ModelUsage
    arguments: dict[str, Any] | None = None
    text: str = ""


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One tool as offered to the router and the generator."""

    name: str  # "read", "bash", "mcp.<tool>"
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments
    source: str = "builtin"  # "builtin" or "mcp:<server>"


class ToolList(Msg, frozen=True):
    """The tool worker's tools, and MCP servers that failed to start (name -> reason)."""

    reply_to: str
    tools: list[ToolSpec]
    failed_servers: dict[str, str] = msgspec.field(default_factory=dict)


class Validated(Msg, frozen=True):
    """Arguments passed the native schema; `arguments` is the normalized form."""

    reply_to: str
    arguments: dict[str, Any]
    target: str = ""


class ToolResult(Msg, frozen=True):
    """A finished tool call. `status=ok` means the tool reported no error."""

    reply_to: str
    status: Literal["ok", "error"]
    exit_code: int | None = None  # -1 = a shell command that did not finish (never success)
    text: str = ""  # plain text, control sequences removed
    error: str = ""
    seconds: float = 0.0
    interrupted: bool = False  # the worker stopped it before it finished (exit_code -1)
    reason: str = ""  # why it was stopped: "cancelled", "timeout", "output_cap", "worker_exit"
    # What a person is shown (the readable view), "" = the text: a command's output without
    # the notes for the model, the text read, a unified diff of a write or an edit.
    display: str = ""


class Failed(Msg, frozen=True):
    """A request the worker understood but could not serve, or a frame it could not read."""

    reply_to: str | None
    code: FailCode
    detail: str
    error_class: str = ""
    usage: ModelUsage | None = None  # a model call that answered, but unusably


FromWorker = (
    Ready
    | Heartbeat
    | Progress
    | ToolProgress
    | Routed
    | Generated
    | ToolList
    | Validated
    | ToolResult
    | Failed
)

T = TypeVar("T")


class Frame(msgspec.Struct, Generic[T], frozen=True, kw_only=True):  # noqa: UP046 (msgspec)
    """The envelope on the wire: the protocol version, then one message."""

    v: int = WIRE_VERSION
    body: T
