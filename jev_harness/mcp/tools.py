"""The MCP tools of a harness session: closed input schemas, output schemas, hints, checks.

Four tools are advertised (docs/HARNESS.md section 7): `observe`, `arguments`, `operate` and, unless
direct-only, `run_task`; `delegate` is an unadvertised alias of `run_task`. Every input schema
is closed (`additionalProperties: false`). Every tool has an `outputSchema` that each of its
results' `structuredContent` fits, a refusal's `{code, message}` included, and the four
behaviour hints, each stated (docs/DECISIONS.md "The jev-harness MCP tools' hints").
Arguments are checked here, in code, so that a bad call is refused with a fixed code and a
message that names the field, never echoing what the caller sent (it may be a path, a body or
a secret).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types

MAX_NAME = 200  # a tool or parameter name
MAX_ID = 4_096  # an option id (links may be long) or a state_ref
MAX_ENTRIES = 64  # parameters of one tool

_IDS = {
    "type": "object",
    "additionalProperties": {"type": "string", "maxLength": MAX_ID},
    "maxProperties": MAX_ENTRIES,
}
_TOOL = {"type": "string", "maxLength": MAX_NAME, "description": "an offered tool's name"}
_REF = {
    "type": "string",
    "maxLength": MAX_ID,
    "description": "the state_ref that observe (or the last operate) returned",
}
_NONE: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

SCHEMAS: dict[str, dict[str, Any]] = {
    "observe": _NONE,
    "arguments": {
        "type": "object",
        "properties": {
            "tool": _TOOL,
            "parents": {**_IDS, "description": "parameter name -> chosen option id, so far"},
            "state_ref": _REF,
        },
        "required": ["tool", "state_ref"],
        "additionalProperties": False,
    },
    "operate": {
        "type": "object",
        "properties": {
            "tool": _TOOL,
            "parameters": {**_IDS, "description": "every parameter name -> chosen option id"},
            "state_ref": _REF,
        },
        "required": ["tool", "parameters", "state_ref"],
        "additionalProperties": False,
    },
    "run_task": _NONE,
}

DESCRIPTIONS = {
    "observe": (
        "The task's current state: state_ref, goal, limits, the observation, the offered tools "
        "with their parameters, delegation readiness and the artifact receipt. Creates no "
        "capture and leaves state_ref unchanged."
    ),
    "arguments": (
        "The next unchosen parameter of an offered tool and its domain (option ids and "
        "descriptions), given the parameters already chosen in `parents`. Creates no capture. "
        "Needs the latest state_ref."
    ),
    "operate": (
        "Run one offered tool with an option id for every parameter. Returns the outcome "
        "(bounded text) and the new state_ref. Needs the latest state_ref."
    ),
    "run_task": (
        "Delegate: Jev runs the task to its end with the same tools and verifier. Returns "
        "status, summary, session id and the artifact receipt."
    ),
}

ALIASES = {"delegate": "run_task"}

_STR: dict[str, Any] = {"type": "string"}
_OBJ: dict[str, Any] = {"type": "object"}
_NULL: dict[str, Any] = {"type": "null"}
_MAYBE_OBJ: dict[str, Any] = {"anyOf": [_OBJ, _NULL]}
_MAYBE_STR: dict[str, Any] = {"anyOf": [_STR, _NULL]}
_PARAMETER = {
    "type": "object",
    "properties": {
        "name": _STR,
        "description": _MAYBE_STR,
        "selection": _STR,
        "depends_on": {"type": "array", "items": _STR},
    },
    "required": ["name"],
}
_OFFERED = {
    "type": "object",
    "properties": {
        "name": _STR,
        "description": _MAYBE_STR,
        "parameters": {"type": "array", "items": _PARAMETER},
    },
    "required": ["name", "parameters"],
}
# What a call answers when it does not run: `busy`, `stale_state`, ... (server.rejection).
REFUSAL = {
    "type": "object",
    "properties": {"code": _STR, "message": _STR},
    "required": ["code", "message"],
    "additionalProperties": False,
}
_ANSWERS: dict[str, dict[str, Any]] = {
    "observe": {
        "type": "object",
        "properties": {
            "state_ref": _STR,
            "session_id": _STR,
            "goal": _STR,
            "limits": _OBJ,
            "tools": {"type": "array", "items": _OFFERED},
            "complete": {"type": "boolean"},
            "delegation": {
                "type": "object",
                "properties": {
                    "available": {"type": "boolean"},
                    "route": _MAYBE_STR,
                    "direct_only": {"type": "boolean"},
                    "same_tools_and_verifier": {"type": "boolean"},
                },
                "required": ["available", "direct_only", "same_tools_and_verifier"],
            },
            "artifact": _MAYBE_OBJ,
            "final": _MAYBE_OBJ,
            "note": _STR,
        },
        "required": ["state_ref", "session_id", "goal", "tools", "delegation", "artifact"],
    },
    "arguments": {
        "type": "object",
        "properties": {
            "tool": _STR,
            "state_ref": _STR,
            "parameter": {"anyOf": [_PARAMETER, _NULL]},
            "options": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": _STR, "description": _MAYBE_STR},
                    "required": ["id"],
                },
            },
            "note": _STR,
        },
        "required": ["tool", "state_ref", "parameter", "options"],
    },
    "operate": {  # the outcome and the new state_ref, or (uncertain) the run's final
        "type": "object",
        "properties": {
            "status": _STR,
            "summary": _MAYBE_STR,
            "text": _MAYBE_STR,
            "error": _MAYBE_STR,
            "state_ref": _STR,
            "complete": {"type": "boolean"},
            "artifact": _MAYBE_OBJ,
            "final": _MAYBE_OBJ,
        },
        "required": ["status"],
    },
    "run_task": {  # the run's result (protocol/results.py RunResult)
        "type": "object",
        "properties": {
            "session_id": _MAYBE_STR,
            "status": _STR,
            "summary": _STR,
            "session_dir": _MAYBE_STR,
            "artifact": _MAYBE_OBJ,
        },
        "required": ["session_id", "status", "summary"],
    },
}
OUTPUTS: dict[str, dict[str, Any]] = {
    name: {"type": "object", "anyOf": [answer, REFUSAL]} for name, answer in _ANSWERS.items()
}

# (readOnly, destructive, idempotent, openWorld), as true for each tool (docs/DECISIONS.md).
HINTS = {
    "observe": (True, False, True, False),
    "arguments": (True, False, True, False),
    "operate": (False, True, True, True),
    "run_task": (False, True, True, True),
}
TITLES = {
    "observe": "Observe the task",
    "arguments": "A parameter's options",
    "operate": "Run one operation",
    "run_task": "Delegate the task to Jev",
}


def hints(name: str) -> types.ToolAnnotations:
    read_only, destructive, idempotent, open_world = HINTS[name]
    return types.ToolAnnotations(
        title=TITLES[name],
        readOnlyHint=read_only,
        destructiveHint=destructive,
        idempotentHint=idempotent,
        openWorldHint=open_world,
    )


def instructions(direct_only: bool) -> str:
    """The server's instructions: run_task is named only where it is offered."""
    direct = "Call observe, then arguments and operate with the latest state_ref"
    if direct_only:
        return f"One jev-harness task, direct-only. {direct}; perform operations one at a time."
    return f"One jev-harness task. {direct}, or run_task to let Jev run the whole task."


def listed(direct_only: bool) -> list[types.Tool]:
    """The advertised tools: run_task only when delegation is possible."""
    names = ["observe", "arguments", "operate"] + ([] if direct_only else ["run_task"])
    return [
        types.Tool(
            name=n,
            title=TITLES[n],
            description=DESCRIPTIONS[n],
            inputSchema=SCHEMAS[n],
            outputSchema=OUTPUTS[n],
            annotations=hints(n),
        )
        for n in names
    ]


class BadArguments(Exception):
    """The call's arguments do not fit the tool's schema; the message names the field only."""


def check(name: str, arguments: Any) -> dict[str, Any]:
    """The arguments of `name` (a canonical tool name), normalised; BadArguments if they don't fit.

    A missing `state_ref` becomes "" (which never matches, so the session refuses it as
    `stale_state` in its place in the precedence order); a missing `parents` or `parameters`
    (or null) becomes {} (refused as `incomplete` by operate when the tool has parameters).
    """
    schema = SCHEMAS[name]
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise BadArguments("the arguments must be an object")
    allowed = schema["properties"]
    unknown = [k for k in arguments if k not in allowed]
    if unknown:
        raise BadArguments(f"{name} takes only {sorted(allowed) or 'no arguments'}")
    out: dict[str, Any] = {}
    if "tool" in allowed:
        out["tool"] = _string(arguments, "tool", MAX_NAME, required=True)
        out["state_ref"] = _string(arguments, "state_ref", MAX_ID, required=False)
    for field in ("parents", "parameters"):
        if field in allowed:
            given = arguments.get(field)
            out[field] = {} if given is None else _ids(given, field)
    return out


def _string(arguments: dict[str, Any], field: str, limit: int, *, required: bool) -> str:
    value = arguments.get(field)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadArguments(f"`{field}` must be a string")
    if len(value) > limit:
        raise BadArguments(f"`{field}` is longer than {limit} characters")
    if not _text(value):
        raise BadArguments(f"`{field}` is not valid Unicode text")
    return value


def _ids(value: Any, field: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise BadArguments(f"`{field}` must be an object of parameter name -> option id")
    if len(value) > MAX_ENTRIES:
        raise BadArguments(f"`{field}` has more than {MAX_ENTRIES} entries")
    for key, item in value.items():
        if len(key) > MAX_NAME or not isinstance(item, str) or len(item) > MAX_ID:
            raise BadArguments(f"every value of `{field}` must be an option id (a short string)")
        if not (_text(key) and _text(item)):
            raise BadArguments(f"`{field}` holds text that is not valid Unicode")
    return dict(value)


def _text(value: str) -> bool:
    """False for a string that cannot be sent on (a lone surrogate from a JSON escape)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
