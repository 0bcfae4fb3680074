"""Task: the base task and the driver API the harness worker calls (see jev_harness.model).

Observation: `{"goal", "limits", "counts", "last_operation", "sources" (last eight capture
summaries), "toolkits" (each toolkit's projection), "last_read" (the last window an operation
returned, <= 1,200 chars)}`, redacted and fitted into 8,192 bytes of canonical JSON (toolkit
projections go first, then the oldest summaries, then half the last_read text).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from jev_harness.model import OfferError, Option, Outcome, Parameter, Selection, Tool, Toolkit
from jev_harness.observation import canonical, fit_observation
from jev_harness.text import clean, clip
from protocol.redact import Redactor, refuse_short

if TYPE_CHECKING:
    from jev_harness.evidence_store import EvidenceStore

RECENT = 8  # summaries kept in the observation; older ones stay reachable through references
MAX_GOAL_CHARS = 2000


class Task:
    """The base task: complete when `verifier(task)` is true; its tool choice is `match`."""

    tool_selection: Selection = "match"

    def __init__(
        self,
        toolkits: Sequence[Toolkit] = (),
        verifier: Callable[[Task], bool] | None = None,
        *,
        store: EvidenceStore | None = None,
    ) -> None:
        self.toolkits = list(toolkits)
        self.verifier = verifier
        self.store = store
        self.goal = ""
        self.limits: dict[str, Any] = {}
        self.redact: Callable[[str], str] = _no_redaction
        self.operations = 0
        self.errors = 0
        self.last_summary = ""
        self.last_read: dict[str, Any] | None = None
        self.windows: dict[str, list[tuple[int, int]]] = {}  # ref -> windows any operation returned
        self.tools: dict[str, Tool] = {}
        self._entries_taken = False
        self._closed = False
        self.install_tools()

    # -- construction -------------------------------------------------------------------

    def install_tools(self) -> None:
        """Let each toolkit register its tools (subclasses add their own after this)."""
        for toolkit in self.toolkits:
            toolkit.install(self)

    def register(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self.tools[tool.name] = tool

    def configure(
        self,
        goal: str,
        limits: Mapping[str, Any] | None = None,
        redact: Callable[[str], str] | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        """Set the goal, the limits shown in observations and the worker's redaction.

        `redact` is the worker's redactor; `secrets` are values replaced by [REDACTED] (on top
        of `redact`, with the token formats: protocol/redact.py). Both apply to observations and
        to the report. A secret too short for its rule is refused (ValueError): the one
        redactor would not replace it, and it must not pass unredacted.
        """
        self.goal = clean(goal)
        self.limits = dict(limits or {})
        if redact is not None:
            self.redact = redact
        known = [s for s in secrets if isinstance(s, str) and s]
        refuse_short(known)
        if known:
            inner, given = self.redact, Redactor(known)

            def redact_known(text: str) -> str:
                return inner(given.text(text))

            self.redact = redact_known

    def entry_operations(self) -> list[tuple[Tool, dict[str, Option]]]:
        """The entry captures, returned once (later calls return [] so nothing is re-fetched)."""
        if self._entries_taken:
            return []
        self._entries_taken = True
        return [op for toolkit in self.toolkits for op in toolkit.entry_operations(self)]

    # -- the offer ----------------------------------------------------------------------

    def tool(self, name: str | Tool) -> Tool:
        if isinstance(name, Tool):
            return name
        try:
            return self.tools[name]
        except KeyError:
            raise OfferError("unoffered", f"no tool named {name!r}") from None

    def offered_tools(self) -> list[Tool]:
        """Tools whose first parameter has a non-empty domain (or whose own rule says yes)."""
        offered = []
        for tool in self.tools.values():
            if tool.parameters:
                if self.domain(tool, tool.parameters[0], {}):
                    offered.append(tool)
            elif tool.available is None or tool.available(self):
                offered.append(tool)
        return offered

    def next_parameter(
        self, tool: str | Tool, parents: Mapping[str, Any] | Iterable[str]
    ) -> Parameter | None:
        """The first parameter of `tool` not among `parents`, or None when all are chosen."""
        chosen = set(parents)
        for param in self.tool(tool).parameters:
            if param.name not in chosen:
                return param
        return None

    def domain(
        self, tool: str | Tool, parameter: str | Parameter, parents: Mapping[str, Option]
    ) -> list[Option]:
        """Fresh options for `parameter`, given the options chosen for earlier parameters."""
        tool = self.tool(tool)
        param = tool.parameter(parameter if isinstance(parameter, str) else parameter.name)
        options = list(param.domain(self, dict(parents)))
        seen: set[str] = set()
        for option in options:
            if not isinstance(option, Option):
                raise TypeError(f"{tool.name}.{param.name}: domain returned {type(option)}")
            if option.id in seen:
                raise ValueError(f"{tool.name}.{param.name}: option id {option.id!r} repeats")
            seen.add(option.id)
        return options

    def resolve(self, tool: str | Tool, ids: Mapping[str, str]) -> dict[str, Option]:
        """Option ids -> options, checked against fresh domains in parameter order."""
        tool = self.tool(tool)
        if tool not in self.offered_tools():
            raise OfferError("unoffered", f"tool {tool.name!r} is not offered now")
        names = [p.name for p in tool.parameters]
        missing = [n for n in names if n not in ids]
        extra = sorted(set(ids) - set(names))
        if missing or extra:
            raise OfferError("incomplete", f"{tool.name}: missing {missing}, extra {extra}")
        chosen: dict[str, Option] = {}
        for param in tool.parameters:
            options = {o.id: o for o in self.domain(tool, param, chosen)}
            if ids[param.name] not in options:
                detail = f"{ids[param.name]!r} is not offered for {tool.name}.{param.name}"
                raise OfferError("unoffered", detail)
            chosen[param.name] = options[ids[param.name]]
        return chosen

    # -- operating ----------------------------------------------------------------------

    def operate(self, tool: str | Tool, chosen: Mapping[str, Option]) -> Outcome:
        """Run one operation; a tool's exception becomes an `error` outcome."""
        tool = self.tool(tool)
        names = [p.name for p in tool.parameters]
        if sorted(chosen) != sorted(names):
            raise OfferError("incomplete", f"{tool.name} needs {names}, got {sorted(chosen)}")
        try:
            result = tool.run(self, dict(chosen))
            outcome = as_outcome(result)
        except Exception as exc:  # a failing tool is an outcome, the run goes on
            outcome = Outcome("error", f"{tool.name} failed: {type(exc).__name__}: {exc}")
        self.operations += 1
        self.errors += outcome.status == "error"
        self.last_summary = f"{tool.name}: {outcome.summary}"
        if outcome.window is not None:
            self._note_window(outcome)
        return outcome

    def _note_window(self, outcome: Outcome) -> None:
        assert outcome.window is not None
        ref, start, end = outcome.window
        self.windows.setdefault(ref, []).append((start, end))
        self.last_read = {"ref": ref, "start": start, "end": end, "text": outcome.text}
        if self.store is not None and ref in self.store:
            self.last_read["source"] = self.store.describe(ref)["source"]

    def was_read(self, ref: str, start: int, end: int) -> bool:
        """True when [start, end) lay wholly inside a window an operation returned."""
        return any(s <= start and end <= e for s, e in self.windows.get(ref, ()))

    # -- state --------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        counts = {"operations": self.operations, "errors": self.errors}
        if self.store is not None:
            counts["captures"] = len(self.store)
        return counts

    def observation(self) -> dict[str, Any]:
        """The unbounded observation; `observe` fits it into 8,192 bytes."""
        obs: dict[str, Any] = {
            "goal": clip(self.goal, MAX_GOAL_CHARS),
            "limits": self.limits,
            "counts": self.counts(),
            "last_operation": self.last_summary,
        }
        if self.store is not None:
            obs["sources"] = [d["summary"] for d in self.store.references()[-RECENT:]]
        obs["toolkits"] = {t.name: t.observe() for t in self.toolkits}
        obs["last_read"] = self.last_read
        return obs

    def observe(self) -> dict[str, Any]:
        """A compact, stable, redacted observation of at most 8,192 bytes; creates no capture."""
        return fit_observation(self.redact_value(self.observation()))

    def state_ref(self) -> str:
        """sha256 of the canonical observation: operations change it, observing does not."""
        return hashlib.sha256(canonical(self.observe())).hexdigest()

    def redact_value(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {k: self.redact_value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.redact_value(v) for v in obj]
        return obj

    def complete(self) -> bool:
        """True when the caller's verifier accepts the task (False without a verifier)."""
        return bool(self.verifier is not None and self.verifier(self) is True)

    def receipt(self) -> dict[str, Any] | None:
        """The artifact receipt; a base task writes no artifact."""
        return None

    def close(self) -> None:
        """Close every toolkit once, even if one of them fails."""
        if self._closed:
            return
        self._closed = True
        failures = []
        for toolkit in self.toolkits:
            try:
                toolkit.close()
            except Exception as exc:  # close the others first, then report
                failures.append(f"{toolkit.name}: {type(exc).__name__}: {exc}")
        if failures:
            raise RuntimeError("closing toolkits failed: " + "; ".join(failures))


def as_outcome(result: Any) -> Outcome:
    """A tool's return value as an Outcome: an Outcome, a text (ok), or a dict of its fields."""
    if isinstance(result, Outcome):
        return result
    if isinstance(result, dict):
        fields = ("status", "summary", "text", "source", "target", "data")
        known = {k: v for k, v in result.items() if k in fields}
        status: Literal["ok", "error"] = "error" if known.pop("status", "ok") == "error" else "ok"
        text = str(known.pop("text", ""))
        summary = str(known.pop("summary", "") or text.split("\n", 1)[0])
        data = known.pop("data", {})
        source, target = str(known.get("source", "")), str(known.get("target", ""))
        return Outcome(
            status, summary, text=text, source=source, target=target, data=dict(data or {})
        )
    text = "" if result is None else str(result)
    return Outcome("ok", text.split("\n", 1)[0], text=text)


def _no_redaction(text: str) -> str:
    return text
