"""The tool worker's executor binding: which OpenHands action each catalog tool is, which of
its fields are offered, and where a path may point. Names and descriptions live in
protocol/catalog.py; this module says how each name runs. Pure checks: no effect happens here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from protocol import catalog
from protocol.messages import ToolSpec
from workers.base import RequestFailed

# The executor binding of each catalog tool (protocol/catalog.py holds names and descriptions):
# tool -> (native command fixed by the tool, argument names offered, required names)
SLICES: dict[str, tuple[str | None, tuple[str, ...], tuple[str, ...]]] = {
    "read": ("view", ("path", "view_range"), ("path",)),
    "write": ("create", ("path", "file_text"), ("path", "file_text")),
    "edit": (None, ("command", "path", "old_str", "new_str", "insert_line"), ("command", "path")),
    "bash": (None, ("command", "is_input", "timeout"), ("command",)),
}
PATH_DESCRIPTION = "Path of the file or directory: absolute, or relative to the workspace."


def confine(workspace: Path, raw: Any, protected: tuple[Path, ...] = ()) -> str:
    """The absolute, resolved form of `raw`; raises invalid_arguments outside the workspace
    or inside a protected directory (jmp's own sessions: its log, lock and artifacts)."""
    if not isinstance(raw, str) or not raw.strip():
        raise RequestFailed("invalid_arguments", "path must be a non-empty string")
    path = Path(raw) if os.path.isabs(raw) else workspace / raw
    resolved = path.resolve()
    if resolved != workspace and workspace not in resolved.parents:
        raise RequestFailed(
            "invalid_arguments", f"path {raw!r} is outside the workspace {workspace}"
        )
    for home in protected:
        if resolved == home or home in resolved.parents:
            raise RequestFailed(
                "invalid_arguments",
                f"path {raw!r} is inside jmp's sessions directory {home}: the file tools never "
                "read or change jmp's own log, lock or artifacts",
            )
    return str(resolved)


def protected_dirs(workspace: Path, given: list[str]) -> tuple[Path, ...]:
    """The sessions directories to keep the file tools out of (resolved, links included);
    one that holds the workspace itself cannot be kept out and is left alone."""
    dirs = (Path(p).resolve() for p in given)
    return tuple(d for d in dirs if d != workspace and d not in workspace.parents)


def tool_spec(name: str, model: Any, bash_timeout_s: float) -> ToolSpec:
    """A slice of the native action's JSON schema (`model`): only the offered fields."""
    _fixed, fields, required = SLICES[name]
    full = model.model_json_schema()
    props = {field: dict(full["properties"][field]) for field in fields}
    if "path" in props:
        props["path"]["description"] = PATH_DESCRIPTION
    if name == "bash":
        props["timeout"]["description"] = (
            f"Optional. Seconds the command may run, at most {bash_timeout_s:g} (also "
            "the default). Past it the command is stopped and reported unfinished."
        )
    if name == "edit":
        props["command"]["enum"] = ["str_replace", "insert"]
        props["command"]["description"] = "`str_replace` or `insert`."
    schema = {
        "type": "object",
        "properties": props,
        "required": list(required),
        "additionalProperties": False,
    }
    return ToolSpec(name=name, description=catalog.BUILTINS[name].description, parameters=schema)


def check_names(tool: str, arguments: dict[str, Any]) -> None:
    """RequestFailed(unknown_tool / invalid_arguments) for an unbound tool, an argument it does
    not offer, or a required one missing."""
    if tool not in SLICES:
        raise RequestFailed("unknown_tool", f"no tool named {tool!r}")
    _fixed, fields, required = SLICES[tool]
    extra = sorted(set(arguments) - set(fields))
    missing = [name for name in required if arguments.get(name) is None]
    if extra or missing:
        what = [f"unexpected argument {n!r}" for n in extra]
        what += [f"missing required argument {n!r}" for n in missing]
        raise RequestFailed("invalid_arguments", f"{tool}: " + "; ".join(what))


def check_edit(tool: str, action: Any) -> None:
    """Arguments the native editor calls required for a command, checked before any effect."""
    if tool != "edit":
        return
    if action.command not in ("str_replace", "insert"):
        raise RequestFailed("invalid_arguments", "edit: command must be str_replace or insert")
    if action.command == "str_replace" and action.old_str is None:
        raise RequestFailed("invalid_arguments", "edit: str_replace needs old_str")
    if action.command == "insert" and (action.insert_line is None or action.new_str is None):
        raise RequestFailed("invalid_arguments", "edit: insert needs insert_line and new_str")
