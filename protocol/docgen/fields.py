"""Field tables shared by the generated docs: JSON-minded type names, defaults, field comments.

Tooling, not runtime: reads a module's source (for trailing field comments) when called.
"""

from __future__ import annotations

import ast
import inspect
import types
import typing
from typing import Any

import msgspec


def field_table(cls: type[msgspec.Struct], comments: dict[str, str]) -> str:
    """A markdown table of a struct's fields: name, type, default, the field's comment."""
    rows = ["| field | type | default | note |", "|---|---|---|---|"]
    for field in msgspec.structs.fields(cls):
        rows.append(
            f"| {field.name} | {type_name(field.type)} | {default(field)} "
            f"| {comments.get(field.name, '')} |"
        )
    return "\n".join(rows)


def default(field: msgspec.structs.FieldInfo) -> str:
    """`"json"` of the default, or `required`."""
    if field.default is not msgspec.NODEFAULT:
        return f"`{msgspec.json.encode(field.default).decode()}`"
    if field.default_factory is not msgspec.NODEFAULT:
        return f"`{msgspec.json.encode(field.default_factory()).decode()}`"
    return "required"


def type_name(tp: Any) -> str:
    """A JSON-minded spelling of a type: `"ok" \\| "error"`, `list[str]`, `int \\| null`."""
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "null"
    if origin is typing.Literal:
        return " \\| ".join(f'"{a}"' for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(tp))
        return f"{origin.__name__}[{args}]"
    if tp is Any:
        return "any"
    return str(getattr(tp, "__name__", tp))


def doc_of(cls: type) -> str:
    """The class's docstring, dedented ("" when it has none)."""
    return inspect.cleandoc(cls.__doc__ or "")


def field_comments(module: types.ModuleType) -> dict[str, dict[str, str]]:
    """{class: {field: trailing comment}} read from the module's source."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                line = lines[item.lineno - 1]
                if "  # " in line:
                    comment = line.split("  # ", 1)[1].strip()
                    found.setdefault(node.name, {})[item.target.id] = comment
    return found
