"""jev-harness's event kinds (`task`, `parameter`, `receipt`; registered in protocol/events.py):
its task script and limits, each parameter chosen, and the receipt of the saved report."""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.event_base import Data


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
