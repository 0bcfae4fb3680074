"""Argument offload (docs/CONTRACT.md section 7): build arguments in code when a schema fixes them.

A schema is fixed when every value it admits is determined: a closed empty object, a required
`const`, a single-value `enum`, `null`, or a closed object whose properties are all required and
fixed. An object with no properties and no `additionalProperties` counts as closed (MCP servers
commonly publish no-argument tools that way; see docs/DECISIONS.md).
"""

from __future__ import annotations

from typing import Any

_NOT_FIXED = object()


def _fixed_value(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return _NOT_FIXED
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list):
        return enum[0] if len(enum) == 1 else _NOT_FIXED
    kind = schema.get("type")
    if kind == "null":
        return None
    if kind == "object" or (kind is None and "properties" in schema):
        return _fixed_object(schema)
    return _NOT_FIXED


def _fixed_object(schema: dict[str, Any]) -> Any:
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if extra not in (None, False) or schema.get("patternProperties"):
        return _NOT_FIXED
    if properties and extra is not False:
        return _NOT_FIXED  # open object with fields: a generator could add more
    required = set(schema.get("required") or ())
    built: dict[str, Any] = {}
    for name, sub in properties.items():
        if name not in required:
            return _NOT_FIXED
        value = _fixed_value(sub)
        if value is _NOT_FIXED:
            return _NOT_FIXED
        built[name] = value
    return built


def fixed_arguments(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The only arguments `schema` admits, or None when a generator must choose them."""
    value = _fixed_value(schema)
    return value if isinstance(value, dict) else None
