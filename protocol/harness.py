"""Kernel<->harness-worker messages (docs/HARNESS.md 2): load a script, observe, offer, operate.

The harness worker holds the task script, its toolkits and its evidence store; the kernel holds
the session, the limits and the selection policy. Options travel as ids and descriptions only:
an option's value never leaves the worker. Same base, tags and frames as protocol.messages.

No model key ever crosses to the harness worker: it runs the task script's code. The kernel
redacts what it sends (goal, context, inputs) and what the worker returns, and it redacts the
report before the worker writes it (`Operated.report` -> `WriteReport`). The one secret the
worker may receive is a provider's own key (PROVIDER_KEYS), and only when the built task holds
a provider that sends it (`TaskLoaded.wants_keys` -> `ProvideKeys`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from protocol.messages import Msg

Selection = Literal["match", "explore"]
Effect = Literal["read", "write"]

# Secrets a toolkit's provider sends itself (CamofoxProvider's bearer key): redacted like the
# model keys, handed to the harness worker only for a task that holds such a provider.
PROVIDER_KEYS = ("CAMOFOX_ACCESS_KEY",)


class OptionSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One offered value as Jev sees it: its id (the label) and a description built in code."""

    id: str
    description: str


class ParameterSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One parameter of a tool: chosen from a domain, in the order the tool lists them."""

    name: str
    description: str = ""
    selection: Selection = "match"
    depends_on: list[str] = msgspec.field(default_factory=list)


class ToolInfo(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool of the task: name, description, effect and parameters."""

    name: str
    description: str = ""
    effect: Effect = "read"
    parameters: list[ParameterSpec] = msgspec.field(default_factory=list)


class Receipt(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The artifact receipt (docs/HARNESS.md section 2) and the verifier's verdict."""

    path: str
    exists: bool
    match: bool
    record_count: int
    digest: str | None  # hex sha256 of the file's bytes; None when there is no file
    sources: list[str] = msgspec.field(default_factory=list)
    verdict: bool | None = None


# --- kernel -> harness worker ------------------------------------------------------


class LoadTask(Msg, frozen=True):
    """Import the script (refused unless its bytes hash to sha256) and build the task.

    `inputs`, `goal` and `context` come redacted: no known secret reaches the script."""

    id: str
    script: str  # absolute path
    sha256: str
    inputs: dict[str, Any]
    goal: str
    context: Any = None
    limits: dict[str, Any] = msgspec.field(default_factory=dict)  # shown in observations
    # The script's resource limits (protocol/limits.py, ScriptLimits.as_dict), set by the
    # worker on itself before the script runs; absent ones are the defaults.
    resources: dict[str, int] = msgspec.field(default_factory=dict)


class ProvideKeys(Msg, frozen=True):
    """The provider keys the loaded task asked for (names from PROVIDER_KEYS), set ones only."""

    id: str
    keys: dict[str, str]


class TakeEntries(Msg, frozen=True):
    """The entry captures of the task's toolkits (once): each is then run as an Operate."""

    id: str


class Observe(Msg, frozen=True):
    """The compact observation, the tools offered now, completion and the receipt. No capture."""

    id: str


class OfferDomain(Msg, frozen=True):
    """The current options of one parameter, given its already chosen parents (option ids)."""

    id: str
    tool: str
    parameter: str
    parents: dict[str, str] = msgspec.field(default_factory=dict)


class Operate(Msg, frozen=True):
    """Run one tool. The kernel has fsynced tool_started before sending (id is the call_id)."""

    id: str
    tool: str
    parameters: dict[str, str]  # parameter name -> option id
    entry: bool = False  # one of the entry captures TakeEntries listed, in its order


class WriteReport(Msg, frozen=True):
    """Write the report the last Operate handed over, as the kernel redacted it (id: call_id).

    The reply is the operation's final `Operated` (with the receipt)."""

    id: str
    document: dict[str, Any]


class CloseTask(Msg, frozen=True):
    """Close the task's toolkits (an owned browser tab is deleted); the task is gone after."""

    id: str


HarnessToWorker = (
    LoadTask | ProvideKeys | TakeEntries | Observe | OfferDomain | Operate | WriteReport | CloseTask
)


# --- harness worker -> kernel ------------------------------------------------------


class TaskLoaded(Msg, frozen=True):
    """The built task: its toolkits, tools, evidence labels, output and tool-choice policy."""

    reply_to: str
    toolkits: list[str]
    tools: list[ToolInfo]
    labels: list[str] = msgspec.field(default_factory=list)
    output: str = ""
    tool_selection: Selection = "match"
    wants_keys: list[str] = msgspec.field(default_factory=list)  # names from PROVIDER_KEYS


class KeysTaken(Msg, frozen=True):
    """The provider keys were handed to `providers` providers of the task."""

    reply_to: str
    providers: int = 0


class EntriesTaken(Msg, frozen=True):
    """The entry operations to log and run, in order: tool name and chosen option ids."""

    reply_to: str
    operations: list[EntrySpec] = msgspec.field(default_factory=list)


class EntrySpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One entry capture: a tool and its options, chosen by the toolkit, not by Jev."""

    tool: str
    parameters: dict[str, str] = msgspec.field(default_factory=dict)


class Observed(Msg, frozen=True):
    """What the task looks like now. `offered` are the tools whose first domain is non-empty."""

    reply_to: str
    observation: dict[str, Any]
    offered: list[ToolInfo]
    state_ref: str = ""  # fingerprint of the observation: operations change it, observing not
    complete: bool = False
    receipt: Receipt | None = None


class DomainOffered(Msg, frozen=True):
    """The options of the asked parameter, fresh."""

    reply_to: str
    options: list[OptionSpec]


class Operated(Msg, frozen=True):
    """An operation ran. `status=error` means the tool raised or refused; it may have acted."""

    reply_to: str
    status: Literal["ok", "error"]
    summary: str = ""
    text: str = ""  # the bounded outcome (at most 1,200 characters of source)
    error: str = ""
    source: str = ""
    target: str = ""
    data: dict[str, Any] = msgspec.field(default_factory=dict)  # bounded detail for the log
    seconds: float = 0.0
    complete: bool = False
    receipt: Receipt | None = None  # after an operation of a write tool
    # A report to write, unredacted: nothing is written until the kernel answers WriteReport.
    report: dict[str, Any] | None = None


class TaskClosed(Msg, frozen=True):
    """The toolkits were closed; `problems` names any that failed to close."""

    reply_to: str
    problems: list[str] = msgspec.field(default_factory=list)


HarnessFromWorker = (
    TaskLoaded | KeysTaken | EntriesTaken | Observed | DomainOffered | Operated | TaskClosed
)
