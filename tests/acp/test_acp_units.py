"""The ACP front end's pure parts: prompt content and event translation (no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, image_block, resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents

from acp_server.content import prompt_text
from acp_server.updates import Translator, title, tool_kind, uncertain_text
from protocol.codec import make_event
from protocol.events import (
    Data,
    FinalData,
    ModelProgressData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

WS = Path("/w")


def events(*data: Data) -> list:
    return [make_event("a" * 32, i + 1, 0.0, d) for i, d in enumerate(data)]


def started(call: str, tool: str = "bash", target: str = "ls") -> ToolStartedData:
    return ToolStartedData(call_id=call, tool=tool, target=target, request="")


def test_prompt_text_joins_blocks_and_refuses_what_it_cannot_take() -> None:
    link = resource_link_block("a.py", "file:///w/a.py")
    embedded = EmbeddedResourceContentBlock(
        type="resource", resource=TextResourceContents(uri="file:///w/b.py", text="x = 1")
    )
    text = prompt_text([text_block("look at "), link, text_block(" \ud800"), embedded])
    assert text.startswith("look at [a.py](file:///w/a.py) \ufffd")
    assert "file:///w/b.py" in text and "x = 1" in text
    with pytest.raises(RequestError, match="Invalid params"):
        prompt_text([image_block("AAAA", "image/png")])
    with pytest.raises(RequestError):
        prompt_text([text_block("   ")])


def test_titles_and_kinds() -> None:
    assert [tool_kind(t) for t in ("read", "write", "edit", "bash", "recall", "mcp.x")] == [
        "read",
        "edit",
        "edit",
        "execute",
        "search",
        "other",
    ]
    assert title("edit", "/w/src/a.py", WS) == "Edit src/a.py"
    assert title("bash", "pytest   -q", WS) == "Run pytest -q"
    assert title("mcp.echo", "hi", WS) == "MCP echo hi"
    assert len(title("bash", "x" * 500, WS)) <= 120


def test_replay_keeps_log_order_and_shows_each_calls_final_state() -> None:
    log = events(
        UserData(text="first"),
        started("c1", "read", "/w/a.py"),
        ModelProgressData(stage="respond", characters=5),
        ToolFinishedData(call_id="c1", tool="read", status="ok", text="contents"),
        started("c2"),
        ToolUncertainData(
            call_id="c2", tool="bash", cause="kernel_exit", acknowledged=False, note="n"
        ),
        FinalData(status="blocked", summary="blocked for now"),
        UserData(text="go on"),
        ToolUncertainData(
            call_id="c2", tool="bash", cause="kernel_exit", acknowledged=True, note="acked"
        ),
        started("c3"),
        FinalData(status="cancelled", summary="Cancelled by the user."),
    )
    updates = list(Translator(WS).replay(log))
    kinds = [u.session_update for u in updates]
    assert kinds == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
    ]
    assert updates[1].locations[0].path == "/w/a.py" and updates[1].kind == "read"
    assert updates[2].status == "completed"
    assert updates[4].status == "failed" and "(acknowledged)" in updates[4].content[0].content.text
    assert updates[8].status == "failed" and "no recorded end" in updates[8].content[0].content.text


def test_live_end_of_an_unseen_call_arrives_whole() -> None:
    translator = Translator(WS)
    (only,) = translator.live(
        events(
            ToolUncertainData(
                call_id="c9",
                tool="bash",
                cause="kernel_exit",
                acknowledged=True,
                note="n",
                target="make",
            )
        )[0]
    )
    assert only.session_update == "tool_call" and only.status == "failed"
    assert only.title == "Run make"
    assert translator.live(events(ModelProgressData(stage="respond", characters=9))[0]) == []


def test_an_uncertain_call_says_what_died() -> None:
    def text(cause: str, mcp_server: bool) -> str:
        data = ToolUncertainData(
            call_id="c",
            tool="mcp.slow",
            cause=cause,
            acknowledged=False,
            note="n",
            mcp_server=mcp_server,
        )
        return uncertain_text(data)

    assert text("worker_exit", True).startswith("Outcome unknown: an MCP server died during")
    assert text("worker_exit", False).startswith("Outcome unknown: the tool worker died during")
    assert text("kernel_exit", False).startswith("Outcome unknown: jmp itself was stopped")
