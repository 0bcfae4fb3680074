"""The MCP Inspector's `--strict` checks of a `tools/list` result, in Python.

`npx @modelcontextprotocol/inspector --cli --method tools/list --strict SERVER...` (Inspector
2.12.0) lints every tool's `inputSchema` and `outputSchema` and exits 6 on any error-severity
finding; it cannot run in the suite (no network at test time), so its rules are restated here
and the suite applies them to what the server lists:

- `boolean-schema` (error): a bare `true` / `false` where a schema object is expected (allowed
  only as the value of additionalProperties, unevaluatedProperties, additionalItems,
  unevaluatedItems);
- `type-union` (warning): `type` given as an array;
- `remote-ref` (warning): a `$ref` that is not `#...` in a schema declaring no `$id`;
- `untyped-schema` (warning): a schema object with no validation keyword at all (the spelling
  of `true`), except directly under `not`.

The walk visits the subschemas of the keywords the Inspector visits. A finding is
`(rule, severity, path)`; this server's schemas must have none, warnings included.
"""

from __future__ import annotations

from typing import Any

BOOLEAN_VALUED = {
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
}
SINGLE = [
    "items",
    "contains",
    "not",
    "propertyNames",
    "if",
    "then",
    "else",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contentSchema",
]
ARRAYS = ["allOf", "anyOf", "oneOf", "prefixItems"]
MAPS = ["properties", "patternProperties", "dependentSchemas", "dependencies", "$defs"]
MAPS.append("definitions")
CONSTRAINING = {
    *("type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum"),
    *("exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "contentMediaType"),
    *("contentEncoding", "contentSchema", "maxItems", "minItems", "uniqueItems", "maxContains"),
    *("minContains", "maxProperties", "minProperties", "required", "dependentRequired"),
    *("allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains", "additionalItems"),
    *("unevaluatedItems", "properties", "patternProperties", "additionalProperties"),
    *("unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies"),
    *("$ref", "$dynamicRef", "$recursiveRef"),
}
TYPES = {"null", "boolean", "object", "array", "number", "string", "integer"}
MAX_DEPTH = 64

Finding = tuple[str, str, str]


def _children(node: dict[str, Any], path: str) -> list[tuple[Any, str, str]]:
    found: list[tuple[Any, str, str]] = []
    for key in MAPS:
        if isinstance(node.get(key), dict):
            found += [(sub, f"{path}.{key}.{name}", key) for name, sub in node[key].items()]
    for key in ARRAYS:
        if isinstance(node.get(key), list):
            found += [(sub, f"{path}.{key}[{i}]", key) for i, sub in enumerate(node[key])]
    for key in SINGLE:
        if key not in node:
            continue
        if key == "items" and isinstance(node[key], list):
            found += [(sub, f"{path}.items[{i}]", key) for i, sub in enumerate(node[key])]
        else:
            found.append((node[key], f"{path}.{key}", key))
    return found


def _declares_id(node: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return False
    if isinstance(node.get("$id"), str) and node["$id"]:
        return True
    return any(_declares_id(sub, depth + 1) for sub, _, _ in _children(node, ""))


def _portable_union(kind: Any) -> bool:
    """A `type` array of distinct JSON Schema type names (the Inspector flags only these)."""
    if not isinstance(kind, list) or not kind:
        return False
    return all(isinstance(t, str) and t in TYPES for t in kind) and len(set(kind)) == len(kind)


def _walk(node: Any, path: str, keyword: str | None, depth: int, ids: bool) -> list[Finding]:
    if depth > MAX_DEPTH:
        return []
    if isinstance(node, bool):
        if keyword is not None and keyword in BOOLEAN_VALUED:
            return []
        return [("boolean-schema", "error", path)]
    if not isinstance(node, dict):
        return []
    found: list[Finding] = []
    kind = node.get("type")
    if _portable_union(kind):
        found.append(("type-union", "warning", path))
    ref = node.get("$ref")
    if isinstance(ref, str) and ref and not ref.startswith("#") and not ids:
        found.append(("remote-ref", "warning", path))
    constrains = any(k in CONSTRAINING for k in node) or (
        "if" in node and ("then" in node or "else" in node)
    )
    if not constrains and keyword != "not":
        found.append(("untyped-schema", "warning", path))
    for sub, sub_path, sub_keyword in _children(node, path):
        found += _walk(sub, sub_path, sub_keyword, depth + 1, ids)
    return found


def lint_tools(tools: list[dict[str, Any]]) -> dict[str, list[Finding]]:
    """Findings per tool name (tools without findings left out), as `--strict` reports them."""
    results: dict[str, list[Finding]] = {}
    for tool in tools:
        findings: list[Finding] = []
        for kind in ("inputSchema", "outputSchema"):
            if kind in tool:
                findings += _walk(tool[kind], kind, None, 0, _declares_id(tool[kind]))
        if findings:
            results[tool["name"]] = findings
    return results
