"""The task model: options, parameters, tools, toolkits, tasks and task scripts.

A task script exports `workflow = TaskScript(build)`; `build(inputs)` returns a `Task`. The
harness worker (the DRIVER) then uses only this API, in this order:

- `task.configure(goal, limits, redact=None, secrets=())` once, before anything else;
- `task.entry_operations()` once: operations (the entry capture of a toolkit) that the driver
  logs and runs through `task.operate` before the first decision;
- per step: `task.offered_tools()` (a tool is offered only when its first parameter has a
  non-empty domain; a parameterless tool when its `available(task)` says so),
  `task.next_parameter(tool, parents)` and `task.domain(tool, parameter, parents)` (fresh
  options every time; asking creates no capture), or `task.resolve(tool, ids)` to turn option
  ids into options (raises `OfferError` with code `unoffered` or `incomplete`);
- `task.operate(tool, chosen)` -> `Outcome` (never raises for a tool's own failure: that is an
  `error` outcome); `task.observe()` -> compact JSON-able dict (<= 8,192 bytes, no capture);
  `task.state_ref()` (sha256 of the canonical observation: every operation changes it, observing
  does not); `task.complete()`, `task.receipt()`, `task.tool_selection`, `task.close()`.

Everything lives in the worker process: a killed worker loses the task, and nothing resumes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jev_harness.text import MAX_DESCRIPTION_CHARS, MAX_WINDOW_CHARS, clean, clip

if TYPE_CHECKING:
    from jev_harness.task import Task

Selection = Literal["match", "explore"]
Effect = Literal["read", "write"]


class OfferError(ValueError):
    """A choice that is not in the current offer; `code` is `unoffered` or `incomplete`."""

    def __init__(self, code: Literal["unoffered", "incomplete"], detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Option:
    """One offered value: Jev sees `id` and `description` (<= 200 chars); code keeps `value`."""

    id: str
    description: str
    value: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"an option id must be a non-empty string, not {self.id!r}")
        object.__setattr__(self, "id", clean(self.id))
        object.__setattr__(self, "description", clip(str(self.description)))


DomainFn = Callable[["Task", Mapping[str, Option]], Iterable[Option]]


@dataclass(frozen=True)
class Parameter:
    """A tool parameter whose `domain(task, parents)` returns fresh options each time."""

    name: str
    description: str
    domain: DomainFn
    selection: Selection = "match"
    depends_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.selection not in ("match", "explore"):
            raise ValueError(f"parameter {self.name!r}: selection must be match or explore")
        object.__setattr__(self, "depends_on", tuple(self.depends_on))


@dataclass(frozen=True)
class Outcome:
    """What an operation returned: `text` holds at most 1,200 characters of source.

    `window` is `(ref, start, end)` of a store window the text shows (it marks passages read);
    `data` is bounded, JSON-able detail for the log (bounds, refs, truncation); `receipt` is
    the artifact receipt after a write.
    """

    status: Literal["ok", "error"]
    summary: str
    text: str = ""
    source: str = ""
    target: str = ""
    window: tuple[str, int, int] | None = None
    data: dict[str, Any] = field(default_factory=dict)
    receipt: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", clip(self.summary))
        object.__setattr__(self, "text", clip(self.text, MAX_WINDOW_CHARS))
        object.__setattr__(self, "source", clip(self.source, 500))
        object.__setattr__(self, "target", clip(self.target, 500))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form for the wire and the log."""
        window = None
        if self.window is not None:
            ref, start, end = self.window
            window = {"ref": ref, "start": start, "end": end}
        return {
            "status": self.status,
            "summary": self.summary,
            "text": self.text,
            "source": self.source,
            "target": self.target,
            "window": window,
            "data": self.data,
            "receipt": self.receipt,
        }


RunFn = Callable[["Task", Mapping[str, Option]], "Outcome | str"]


@dataclass(frozen=True)
class Tool:
    """A named operation; `run(task, chosen)` performs it (`effect` read or write)."""

    name: str
    description: str
    parameters: tuple[Parameter, ...]
    run: RunFn
    effect: Effect = "read"
    available: Callable[[Task], bool] | None = None  # the offer rule of a parameterless tool

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"tool {self.name!r}: duplicate parameter names {names}")
        for index, param in enumerate(self.parameters):
            unknown = set(param.depends_on) - set(names[:index])
            if unknown:
                raise ValueError(
                    f"tool {self.name!r}: {param.name!r} depends on {sorted(unknown)}, "
                    "which are not earlier parameters"
                )
        if self.effect not in ("read", "write"):
            raise ValueError(f"tool {self.name!r}: effect must be read or write")

    def parameter(self, name: str) -> Parameter:
        for param in self.parameters:
            if param.name == name:
                return param
        raise OfferError("incomplete", f"tool {self.name!r} has no parameter {name!r}")

    def describe(self) -> dict[str, Any]:
        """The tool as an MCP client or the log sees it."""
        return {
            "name": self.name,
            "description": self.description,
            "effect": self.effect,
            "parameters": [
                {
                    "name": p.name,
                    "description": p.description,
                    "selection": p.selection,
                    "depends_on": list(p.depends_on),
                }
                for p in self.parameters
            ],
        }


class Toolkit:
    """A reusable source of tools. Subclasses set `name` and override `install`."""

    name = "toolkit"

    def observe(self) -> dict[str, Any]:
        """A compact, stable projection of the toolkit's state: no capture, no I/O."""
        return {}

    def install(self, task: Task) -> None:
        """Register this toolkit's tools with `task.register(Tool(...))`."""

    def entry_operations(self, task: Task) -> list[tuple[Tool, dict[str, Option]]]:
        """Operations the driver runs (and logs) before the first decision: the entry capture."""
        return []

    def close(self) -> None:
        """Release what the toolkit owns (connections, an opened browser tab)."""


@dataclass(frozen=True)
class TaskScript:
    """A script module exports `workflow = TaskScript(build)`; `build(inputs)` returns a Task."""

    build: Callable[[dict[str, Any]], Task]

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise TypeError("TaskScript(build): build must be callable")


__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "OfferError",
    "Option",
    "Outcome",
    "Parameter",
    "TaskScript",
    "Tool",
    "Toolkit",
]
