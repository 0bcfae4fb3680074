"""Frames checked against the official ACP JSON Schema (tests/acp/schema/, vendored).

`problems(frame, sender, answers)` lists what is wrong with one JSON-RPC frame: the envelope
(JSON-RPC 2.0, an id the schema allows), its params or result against the definition of its
method (the schema's `x-method` / `x-side`), an error against `Error`, and, stricter than the
schema, every object key the schema does not name. The schema lets many objects carry more
(`additionalProperties` unset means allowed); here a key is named only by a `properties` entry
of a definition that applies to the value (its own, its `allOf`, and the `anyOf` / `oneOf`
branches the value validates against), or is free where the schema says so (`additionalProperties:
true`, or a schema that constrains no properties, as `rawInput` and `_meta`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal

import jsonschema

SCHEMA = json.loads((Path(__file__).parent / "schema" / "schema.json").read_text())
DEFS: dict[str, Any] = SCHEMA["$defs"]
ENVELOPE = {"jsonrpc", "id", "method", "params", "result", "error"}
Sender = Literal["client", "agent"]


def _by_method() -> dict[tuple[str, str], dict[str, str]]:
    """(method, x-side) -> {"params": def name, "result": def name}. x-side is the side that
    receives the request (and sends the response)."""
    table: dict[tuple[str, str], dict[str, str]] = {}
    for name, definition in DEFS.items():
        method, side = definition.get("x-method"), definition.get("x-side")
        if method is None:
            continue
        part = "result" if name.endswith("Response") else "params"
        table.setdefault((method, side), {})[part] = name
    return table


METHODS = _by_method()


def definition(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


@functools.lru_cache(maxsize=4096)
def _validator(key: str) -> Any:
    schema = json.loads(key)
    if isinstance(schema, dict):
        schema = {**schema, "$defs": DEFS}
    return jsonschema.Draft202012Validator(schema)


def _valid(value: Any, schema: Any) -> bool:
    return bool(_validator(json.dumps(schema, sort_keys=True)).is_valid(value))


def _errors(value: Any, schema: Any) -> list[str]:
    found = _validator(json.dumps(schema, sort_keys=True)).iter_errors(value)
    return [f"{'/'.join(map(str, e.absolute_path)) or '.'}: {e.message[:300]}" for e in found]


def _resolve(schema: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema and len(schema) == 1:
        schema = DEFS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _applying(value: Any, schema: Any) -> list[dict[str, Any]]:
    """Every subschema that applies to value: schema, its refs and allOf members, and the
    anyOf / oneOf branches value validates against (recursively)."""
    found: list[dict[str, Any]] = []
    stack = [schema]
    while stack:
        current = stack.pop()
        if isinstance(current, dict) and "$ref" in current:
            stack.append(DEFS[current["$ref"].rsplit("/", 1)[-1]])
            current = {k: v for k, v in current.items() if k != "$ref"}
        if not isinstance(current, dict):
            continue
        found.append(current)
        stack.extend(current.get("allOf", []))
        for key in ("anyOf", "oneOf"):
            stack.extend(b for b in current.get(key, []) if _valid(value, b))
    return found


def unnamed(value: Any, schema: Any, path: str = "$") -> set[str]:
    """Paths of object keys in value that no applying subschema names (see the module doc)."""
    branches = _applying(value, schema)
    if isinstance(value, dict):
        named: dict[str, list[Any]] = {}
        extra: list[Any] = []
        free = not any("properties" in b for b in branches)
        for branch in branches:
            for key, sub in branch.get("properties", {}).items():
                named.setdefault(key, []).append(sub)
            more = branch.get("additionalProperties", branch.get("unevaluatedProperties"))
            if more is True:
                free = True
            elif isinstance(more, dict):
                extra.append(more)
        if free and not extra:
            return set()
        found: set[str] = set()
        for key, item in value.items():
            subs = named.get(key) or extra
            where = f"{path}.{key}"
            if not subs:
                if not free:
                    found.add(where)
                continue
            # Named by several applying subschemas: unnamed below only if unnamed by all.
            found |= set.intersection(*(unnamed(item, sub, where) for sub in subs))
        return found
    if isinstance(value, list):
        items = [b["items"] for b in branches if isinstance(b.get("items"), dict)]
        found = set()
        for n, item in enumerate(value):
            if items:
                found |= set.intersection(*(unnamed(item, sub, f"{path}[{n}]") for sub in items))
        return found
    return set()


def check(value: Any, name: str, where: str) -> list[str]:
    """value against the definition `name`: schema errors, then unnamed fields."""
    schema = definition(name)
    errors = [f"{where} ({name}) {e}" for e in _errors(value, schema)]
    if errors:
        return errors
    return [
        f"{where} ({name}) carries {p}, which the schema does not name"
        for p in sorted(unnamed(value, schema, where))
    ]


def problems(frame: Any, sender: Sender, answers: str | None = None) -> list[str]:
    """What is wrong with one frame `sender` wrote; `answers`: the method of the request a
    response answers (None when unknown, e.g. the reply to a line that was no message)."""
    if not isinstance(frame, dict):
        return [f"not a JSON object: {frame!r:.200}"]
    found = [f"unknown envelope key {key!r}" for key in sorted(set(frame) - ENVELOPE)]
    if frame.get("jsonrpc") != "2.0":
        found.append(f"jsonrpc is {frame.get('jsonrpc')!r}, not '2.0'")
    if "id" in frame:
        found += check(frame["id"], "RequestId", "id")
    receiver = "agent" if sender == "client" else "client"
    method = frame.get("method")
    if method is not None:
        entry = METHODS.get((method, receiver)) or METHODS.get((method, "protocol"))
        if entry is None or "params" not in entry:
            return [*found, f"{sender} sent {method!r}, which the schema has no {receiver} method"]
        if "result" in frame or "error" in frame:
            found.append("a request or notification that carries a result or error")
        return found + check(frame.get("params"), entry["params"], f"{method} params")
    if "error" in frame:
        if "result" in frame:
            found.append("a response with both result and error")
        return found + check(frame["error"], "Error", "error")
    if "result" not in frame:
        return [*found, "neither a request, a notification nor a response"]
    entry = METHODS.get((answers, sender)) if answers else None
    if entry is None or "result" not in entry:
        return [*found, f"a result for {answers!r}, which the schema has no {sender} response"]
    return found + check(frame["result"], entry["result"], f"{answers} result")
