"""The built-in tool catalog (protocol/catalog.py) is the one place a tool's description lives."""

from __future__ import annotations

import ast
from pathlib import Path

from kernel.context.recall.tool import RECALL_SCHEMA
from kernel.context.state import Call, invalidate_for_action
from kernel.loop import prompts
from protocol import catalog

ROOT = Path(__file__).resolve().parents[2]


def test_router_options_are_the_catalog_descriptions() -> None:
    options = prompts.route_options({"mcp.x": "an MCP tool"})
    builtin = [name for name in options if name in catalog.BUILTINS]
    assert builtin == ["read", "write", "edit", "bash", "recall"]
    for name in builtin:
        assert options[name] == catalog.BUILTINS[name].description
    assert RECALL_SCHEMA["description"] == catalog.RECALL.description


def test_the_router_is_told_write_refuses_to_overwrite() -> None:
    # OpenHands' FileEditor `create` refuses an existing path (editor.py: "File already exists").
    text = catalog.WRITE.description
    assert "Refused if the file already exists" in text and "overwrite" not in text


def test_every_worker_tool_has_an_executor_binding() -> None:
    tree = ast.parse((ROOT / "workers" / "tool" / "binding.py").read_text())
    slices = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "SLICES"
    )
    assert isinstance(slices, ast.Dict)
    bound = [k.value for k in slices.keys if isinstance(k, ast.Constant)]
    assert bound == [t.name for t in catalog.WORKER_TOOLS]


def test_no_description_text_outside_the_catalog() -> None:
    for path in (
        "kernel/loop/prompts.py",
        "workers/tool/__main__.py",
        "workers/tool/binding.py",
        "kernel/context/recall/tool.py",
    ):
        text = (ROOT / path).read_text()
        for tool in catalog.BUILTINS.values():
            assert tool.description[:40] not in text, (path, tool.name)


def test_invalidation_follows_the_effect_class() -> None:
    snaps = [
        Call(call_id="1", tool="read", target="/w/a", seq=1),
        Call(call_id="2", tool="read", target="/w/b", seq=2),
    ]
    assert invalidate_for_action(snaps, "read", "/w/a") == snaps
    assert invalidate_for_action(snaps, "recall", "") == snaps
    assert [s.target for s in invalidate_for_action(snaps, "write", "/w/a")] == ["/w/b"]
    assert [s.target for s in invalidate_for_action(snaps, "edit", "/w/b")] == ["/w/a"]
    assert invalidate_for_action(snaps, "bash", "ls") == []
    assert invalidate_for_action(snaps, "mcp.anything", "") == []
    assert catalog.effect_of("mcp.anything") == "any"


def test_the_acp_front_end_reads_the_catalog_not_tool_names() -> None:
    """acp_server/updates.py derives kinds, titles, locations and diffs from the catalog (its
    effect class, snapshot and shell flags): no built-in tool's name is compared, looked up or
    listed there (ACP's own kinds `read` and `edit` may be returned)."""
    tree = ast.parse((ROOT / "acp_server" / "updates.py").read_text())
    spots: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            spots += [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            spots += [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            spots += node.elts
    names = {
        n.value
        for spot in spots
        for n in ast.walk(spot)
        if isinstance(n, ast.Constant) and n.value in catalog.BUILTINS
    }
    assert not names, sorted(names)
