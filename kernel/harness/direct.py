"""A harness session for direct use: a caller (Python, an MCP client) or Jev decides.

`observe()` / `arguments()` create no capture; `operate()` runs one operation chosen by the
caller (recorded with method `caller`); `delegate()` lets Jev run the task to its end. Refusals
raise `HarnessRejected` with a fixed code (docs/HARNESS.md section 7), checked in this order, with
no `tool_started` written: busy, direct_only, route_fixed, budget_exhausted, stale_state,
repeated_operation, incomplete, unoffered. Calls are served one at a time: a concurrent call is
refused `busy`, never queued.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kernel.errors import JmpError
from kernel.harness.opening import Opened
from kernel.harness.records import reply_fields
from kernel.run.ledger import RunEnded
from kernel.supervision.supervisor import WorkerDied, WorkerFailed
from protocol.harness import Observed, ToolInfo

CODES = (
    "busy",
    "direct_only",
    "route_fixed",
    "budget_exhausted",
    "stale_state",
    "repeated_operation",
    "incomplete",
    "unoffered",
)


class HarnessRejected(JmpError):
    """A call refused before anything ran; `code` is one of CODES, the first word of the text."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


class HarnessSession:
    """One harness session: its kernel Session, harness worker and (unless direct-only) Jev."""

    def __init__(self, opened: Opened, direct_only: bool) -> None:
        self._opened = opened
        self.engine = opened.engine
        self.session = opened.session
        self.direct_only = direct_only
        self.route: str | None = None  # "direct" or "delegate", fixed once one has executed
        self._busy = threading.Lock()
        self._closed = False

    @property
    def session_id(self) -> str:
        return str(self.session.id)

    @property
    def directory(self) -> Any:
        return self.session.directory

    @contextmanager
    def _call(self) -> Iterator[None]:
        if not self._busy.acquire(blocking=False):
            raise HarnessRejected("busy", "another call is in flight")
        try:
            if self._closed:
                raise HarnessRejected("budget_exhausted", "the session is closed")
            yield
            self.session.sync()  # what the call recorded is durable before its answer
        finally:
            self._busy.release()

    # --- observing ------------------------------------------------------------

    def _materialize(self) -> dict[str, Any] | None:
        """The entry capture, at the first call; its final if that capture became uncertain."""
        try:
            self.engine.materialize()
        except RunEnded as end:
            return self.engine.finish(end.status, end.summary)
        return None

    def observe(self) -> dict[str, Any]:
        """The state_ref, goal, limits, observation, offered tools, delegation and receipt."""
        with self._call():
            self._materialize()
            observed, _state, ref = self.engine.observe()
            return self._view(observed, ref)

    def _view(self, observed: Observed, ref: str) -> dict[str, Any]:
        engine = self.engine
        return {
            "state_ref": ref,
            "session_id": self.session_id,
            "goal": engine.goal,
            "limits": {**engine.limits_view(), "seconds_left": max(0.0, engine.remaining())},
            "observation": observed.observation,
            "tools": [_describe(t) for t in observed.offered],
            "complete": observed.complete,
            "delegation": {
                "available": not self.direct_only and self.route != "direct",
                "route": self.route,
                "direct_only": self.direct_only,
                "same_tools_and_verifier": True,
            },
            "artifact": engine.artifact(),
            "final": engine.final,
        }

    def arguments(
        self, tool: str, parents: dict[str, str] | None = None, state_ref: str | None = None
    ) -> dict[str, Any]:
        """The next unchosen parameter of `tool` and its options (empty when none is left)."""
        with self._call():
            self._materialize()
            observed, _state, ref = self.engine.observe()
            self._check_ref(state_ref, ref)
            parents = dict(parents or {})
            info = next((t for t in observed.offered if t.name == tool), None)
            result: dict[str, Any] = {"tool": tool, "state_ref": ref, "parameter": None}
            if info is None:
                return {**result, "options": [], "note": f"tool {tool!r} is not offered now"}
            pending = [p for p in info.parameters if p.name not in parents]
            if not pending:
                return {**result, "options": [], "note": "every parameter is chosen"}
            try:
                options = self.engine.harness.domain(tool, pending[0].name, parents)
            except WorkerFailed as exc:
                return {**result, "options": [], "note": exc.detail}
            return {
                **result,
                "parameter": {
                    "name": pending[0].name,
                    "description": pending[0].description,
                    "selection": pending[0].selection,
                    "depends_on": list(pending[0].depends_on),
                },
                "options": [{"id": o.id, "description": o.description} for o in options],
            }

    # --- acting ---------------------------------------------------------------

    def operate(
        self, tool: str, parameters: dict[str, str], state_ref: str | None = None
    ) -> dict[str, Any]:
        """Run one caller-chosen operation (every parameter given as an option id)."""
        with self._call():
            if self.route == "delegate":
                raise HarnessRejected("route_fixed", "this session's task was delegated to Jev")
            self._check_budget()
            if (final := self._materialize()) is not None:
                return {"status": "uncertain", "summary": final["summary"], "final": final}
            observed, _state, ref = self.engine.observe()
            self._check_ref(state_ref, ref)
            info = self._check_offer(observed, tool, dict(parameters))
            self._record_choices(observed, info, dict(parameters))
            try:
                reply = self.engine.execute(info, dict(parameters))
            except RunEnded as end:  # the operation's outcome is unknown: the run is over
                final = self.engine.finish(end.status, end.summary)
                return {"status": "uncertain", "summary": end.summary, "final": final}
            self.route = "direct"
            after, _state, new_ref = self.engine.observe()
            return {
                **reply_fields(reply),
                "state_ref": new_ref,
                "complete": after.complete,
                "artifact": self.engine.artifact(),
            }

    def delegate(self, reject_exhausted: bool = True) -> dict[str, Any]:
        """Jev runs the task to its end (same tools and verifier); returns the run's result.

        With `reject_exhausted=False` (the CLI's `run`), a budget already spent is not a
        rejection: the run ends `blocked` with its final, like any other run.
        """
        with self._call():
            if self.direct_only:
                raise HarnessRejected("direct_only", "this session was opened direct-only")
            if self.route == "direct":
                raise HarnessRejected("route_fixed", "operations were already chosen directly")
            if self.engine.final is not None:
                return dict(self.engine.final)
            if reject_exhausted:
                self._check_budget()
            self.route = "delegate"
            return self.engine.delegate()

    def _check_budget(self) -> None:
        if self.engine.final is not None:
            raise HarnessRejected("budget_exhausted", "the run has ended")
        if why := self.engine.exhausted():
            raise HarnessRejected("budget_exhausted", why)

    def _check_ref(self, given: str | None, current: str) -> None:
        if given is not None and given != current:
            raise HarnessRejected("stale_state", "state_ref is not the current state (observe)")

    def _check_offer(self, observed: Observed, tool: str, parameters: dict[str, str]) -> ToolInfo:
        known = self.engine.tools.get(tool)
        if known is not None and (tool, tuple(sorted(parameters.items()))) in self.engine.executed:
            raise HarnessRejected("repeated_operation", f"{tool} already ran with these options")
        if known is not None:
            names = [p.name for p in known.parameters]
            missing = [n for n in names if n not in parameters]
            extra = len(set(parameters) - set(names))
            if missing or extra:  # caller-supplied names are counted, never echoed
                raise HarnessRejected(
                    "incomplete", f"{tool} takes {names}: missing {missing}, {extra} unknown"
                )
        info = next((t for t in observed.offered if t.name == tool), None)
        if info is None:
            raise HarnessRejected("unoffered", "that tool is not offered now")
        chosen: dict[str, str] = {}
        for param in info.parameters:
            try:
                options = self.engine.harness.domain(tool, param.name, chosen)
            except WorkerFailed:
                raise HarnessRejected("unoffered", f"a parent of {tool}.{param.name}") from None
            if parameters[param.name] not in {o.id for o in options}:
                raise HarnessRejected("unoffered", f"option not offered for {tool}.{param.name}")
            chosen[param.name] = parameters[param.name]
        return info

    def _record_choices(
        self, observed: Observed, info: ToolInfo, parameters: dict[str, str]
    ) -> None:
        decider, selection = self.engine.decider, self.engine.loaded.tool_selection
        decider.caller_tool(info.name, [t.name for t in observed.offered], selection)
        for param in info.parameters:
            decider.caller_parameter(
                info.name, param.name, parameters[param.name], param.selection, 0
            )

    # --- the end --------------------------------------------------------------

    def __enter__(self) -> HarnessSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> dict[str, Any]:
        """Write `final` if the run has none, close toolkits and workers; idempotent."""
        with self._busy:
            if self._closed:
                return dict(self.engine.final or {})
            self._closed = True
            try:
                result = self.engine.final or self._final()
            finally:
                self._opened.close()
            return dict(result)

    def _final(self) -> dict[str, Any]:
        complete = False  # a stopped worker (an aborted call) can complete nothing
        try:
            if self.engine.harness.worker.alive:
                complete = self.engine.observe()[0].complete
        except (WorkerDied, WorkerFailed):
            complete = False
        if complete:
            return self.engine.finish("completed", self.engine.completed_summary())
        why = self.engine.exhausted()
        if why:
            return self.engine.finish("blocked", why)
        return self.engine.finish("cancelled", "the caller closed the session before completion")


def _describe(tool: ToolInfo) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "effect": tool.effect,
        "parameters": [
            {
                "name": p.name,
                "description": p.description,
                "selection": p.selection,
                "depends_on": list(p.depends_on),
            }
            for p in tool.parameters
        ],
    }
