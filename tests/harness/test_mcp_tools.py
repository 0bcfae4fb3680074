"""The MCP server's tool list and argument checks, in-process (no server started)."""

from __future__ import annotations

import pytest

from jev_harness.mcp import tools
from jev_harness.mcp.server import rejection
from tests.harness.schema_lint import lint_tools


def test_the_listed_tools_have_closed_schemas_and_delegate_is_not_listed() -> None:
    assert [t.name for t in tools.listed(False)] == ["observe", "arguments", "operate", "run_task"]
    assert [t.name for t in tools.listed(True)] == ["observe", "arguments", "operate"]
    for tool in tools.listed(False):
        assert tool.inputSchema["additionalProperties"] is False
    assert tools.ALIASES == {"delegate": "run_task"}


def test_missing_optional_parts_are_normalised() -> None:
    assert tools.check("operate", {"tool": "t"}) == {"tool": "t", "state_ref": "", "parameters": {}}
    assert tools.check("arguments", {"tool": "t", "state_ref": "r"})["parents"] == {}
    assert tools.check("observe", None) == {}
    assert tools.check("arguments", {"tool": "t", "parents": None, "state_ref": None}) == {
        "tool": "t",
        "state_ref": "",
        "parents": {},
    }


SECRET = "/home/u/.ssh/id_rsa-SECRET"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("observe", {"x": SECRET}),
        ("run_task", {"goal": SECRET}),
        ("operate", {"parameters": {}}),  # no tool
        ("operate", {"tool": 5, "parameters": {}}),
        ("operate", {"tool": "t", "parameters": [SECRET]}),
        ("operate", {"tool": "t", "parameters": {"p": 7}}),
        ("operate", {"tool": "t", "parameters": {"p": SECRET * 500}}),  # over MAX_ID
        ("operate", {"tool": "t" * 201, "parameters": {}}),
        ("operate", {"tool": "t", "parameters": {"p": "\ud800" + SECRET}}),  # lone surrogate
        ("arguments", {"tool": "\udcff", "state_ref": "r"}),
        ("arguments", {"tool": "t", "state_ref": 1}),
        ("arguments", SECRET),
    ],
)
def test_bad_arguments_are_named_without_echoing_them(name: str, arguments: object) -> None:
    with pytest.raises(tools.BadArguments) as info:
        tools.check(name, arguments)
    assert SECRET not in str(info.value) and "\ud800" not in str(info.value)


def test_a_rejection_has_its_code_first() -> None:
    result = rejection("stale_state")
    assert result.isError is True
    assert result.structuredContent == {
        "code": "stale_state",
        "message": result.structuredContent["message"],
    }  # type: ignore[index]
    assert result.content[0].text.split()[0] == "stale_state"  # type: ignore[union-attr]


def test_the_listed_schemas_pass_the_inspectors_strict_checks() -> None:
    listed = [t.model_dump(by_alias=True, exclude_none=True) for t in tools.listed(False)]
    assert lint_tools(listed) == {}  # no finding at all, warnings included


@pytest.mark.parametrize(
    ("schema", "rule"),
    [
        ({"type": "object", "properties": {"x": True}}, "boolean-schema"),
        ({"type": "object", "properties": {"x": {"type": ["string", "null"]}}}, "type-union"),
        ({"type": "object", "properties": {"x": {"$ref": "https://e.example/s"}}}, "remote-ref"),
        ({"type": "object", "properties": {"x": {"description": "anything"}}}, "untyped-schema"),
        ({"type": "object", "additionalProperties": {}}, "untyped-schema"),
    ],
)
def test_the_strict_checks_find_what_the_inspector_finds(schema: object, rule: str) -> None:
    [(found, _severity, path)] = lint_tools([{"name": "t", "inputSchema": schema}])["t"]
    assert found == rule and path.startswith("inputSchema.")
    assert lint_tools([{"name": "t", "inputSchema": {"type": "object", "x": 1}}]) == {}
