"""The ACP front end's pure parts: prompt content and event translation (no processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, image_block, resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents

from acp_server.content import prompt_text
from acp_server.translator import Translator
from acp_server.updates import title, tool_kind, uncertain_text
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
    assert title("mcp.lookup", "glossary", WS) == "MCP glossary: lookup"  # server, then tool
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
    assert text("cancelled", False).startswith("Outcome unknown: you cancelled this call")


def test_a_cancelled_command_is_asked_about_as_cancelled_not_as_a_crash() -> None:
    """Issue 24 item 1: the person's own cancel was later described as "started, no recorded
    end" and "jmp itself was stopped"."""
    from types import SimpleNamespace

    from acp_server.permission import describe
    from kernel.store.pending import unsettled

    log = events(
        started("c1", target="make test"),
        ToolFinishedData(
            call_id="c1",
            tool="bash",
            status="error",
            exit_code=-1,
            interrupted=True,
            reason="cancelled",
        ),
    )
    handle: Any = SimpleNamespace(session=SimpleNamespace(workspace=WS))
    asked = describe(unsettled(log), handle).content[0].content.text
    assert "you cancelled it before it finished" in asked, asked
    assert "no recorded end" not in asked and "--ack-interrupted" not in asked


def schema_fields() -> set[str]:
    """The aliases of every field of the SDK's schema models that holds protocol, not text: a
    Literal or enum (a discriminator, a status, a kind) or an id."""
    import enum
    import inspect
    import typing

    import acp.schema
    from pydantic import BaseModel

    def fixed(t: object) -> bool:
        if typing.get_origin(t) is typing.Literal:
            return True
        if inspect.isclass(t) and issubclass(t, enum.Enum):
            return True
        return any(fixed(a) for a in typing.get_args(t))

    found = set()
    for model in vars(acp.schema).values():
        if inspect.isclass(model) and issubclass(model, BaseModel) and model is not BaseModel:
            for name, info in model.model_fields.items():
                alias = info.alias or name
                if fixed(info.annotation) or alias.endswith("Id") or alias == "id":
                    found.add(alias)
    return found


def test_every_protocol_field_of_the_schema_is_kept_from_redaction() -> None:
    """A new SDK version with a new enum or id field fails here until frames.STRUCTURAL has it."""
    from acp_server.frames import STRUCTURAL

    assert schema_fields() - STRUCTURAL == set()


def test_scrub_redacts_string_values_never_keys_or_protocol_values() -> None:
    from acp_server.frames import scrub
    from kernel.store.redact import Redactor

    redactor = Redactor(("result", "session", "completed", "/home/me/proj", "tool_call"))
    frame = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "completed",
            "update": {
                "sessionUpdate": "tool_call",
                "status": "completed",
                "title": "Run echo result in /home/me/proj/session",
                "content": [{"type": "content", "content": {"type": "text", "text": "result"}}],
                "rawInput": {"status": "completed", "result": ["session"]},
            },
        },
    }
    clean = scrub(frame, redactor)
    assert clean["method"] == "session/update" and clean["params"]["sessionId"] == "completed"
    update = clean["params"]["update"]
    assert (update["sessionUpdate"], update["status"]) == ("tool_call", "completed")
    assert update["title"] == "Run echo [REDACTED] in [REDACTED]/[REDACTED]"
    assert update["content"][0]["content"] == {"type": "text", "text": "[REDACTED]"}
    # free JSON (tool input) holds no protocol: all its strings are text; keys stay
    assert update["rawInput"] == {"status": "[REDACTED]", "result": ["[REDACTED]"]}
    assert frame["params"]["update"]["title"].startswith("Run echo result")  # a copy


def test_an_overlong_line_is_answered_with_its_id_or_ends_our_request() -> None:
    from acp_server.frames import Refused, overlong
    from acp_server.wire import MAX_LINE_BYTES

    assert MAX_LINE_BYTES == 16 * 1024 * 1024  # docs/EDITORS.md says 16 MiB

    def reply_id(head: bytes) -> object:
        verdict = overlong(head, 100)
        assert isinstance(verdict, Refused) and "more than 100 bytes" in verdict.message
        return verdict.request_id

    assert reply_id(b'{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"x') == 7
    assert reply_id(b' {"id":"a-1","jsonrpc":"2.0","params":{"prompt":[') == "a-1"
    assert reply_id(b'{"jsonrpc":"2.0","method":"x","params":{"id":3,"text":"aaa') is None
    assert reply_id(b'{"method":"x","params":{"id":3},"id":4,"x') == 4  # a whole member
    assert reply_id(b'{"method":"x","params":{"id":3},"id":4') is None  # cut: it may be 45
    assert reply_id(b'{"id":[1],"method":"x"') is None
    assert reply_id(b"[1, 2") is None and reply_id(b"") is None
    # the client's answer to our request 0 ends that request with an error, answers nothing
    ends = overlong(b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"x":"', 100)
    assert isinstance(ends, dict) and (ends["id"], ends["error"]["code"]) == (0, -32600)


def test_a_stopped_command_says_one_thing_about_its_exit() -> None:
    """Issue 24 item 6: after a cancel the output said "exit code 130" (the shell) and then
    "[exit code -1]"."""
    from acp_server.updates import finished

    def text(**fields: Any) -> str:
        data = ToolFinishedData(call_id="c", tool="bash", status="error", text="out", **fields)
        return finished(data, None).content[0].content.text

    stopped = text(exit_code=-1, interrupted=True, reason="cancelled")
    assert "[exit code" not in stopped and "you cancelled it" in stopped
    assert "time limit" in text(exit_code=-1, interrupted=True, reason="timeout")
    assert text(exit_code=2).endswith("[exit code 2]")
    assert "exit code -1" not in text(exit_code=-1)  # a command left running: no exit code
    shown = text(exit_code=0, display="just the output")  # the person's view, not the model's
    assert shown.startswith("just the output") and "out\n" not in shown


def test_edits_carry_a_diff_and_a_line() -> None:
    """Issue 24 item 6: an `insert` sent no diff, and no location had a line."""
    from acp_server.updates import diff, locations

    insert = {"command": "insert", "path": "/w/a.py", "insert_line": 4, "new_str": "x = 1\n"}
    (change,) = diff("edit", {"arguments": insert, "target": "/w/a.py"})
    assert (change.type, change.old_text, change.new_text) == ("diff", "", "x = 1\n")
    (place,) = locations("edit", "/w/a.py", WS, {"arguments": insert})
    assert place.line == 5  # the first inserted line
    (view,) = locations("read", "/w/a.py", WS, {"arguments": {"view_range": [12, 20]}})
    assert view.line == 12


def test_an_edit_is_located_at_its_old_text(tmp_path: Path) -> None:
    from acp_server.updates import locations

    source = tmp_path / "m.py"
    source.write_text("a\nb\nold line\nc\n")
    edit = {"arguments": {"command": "str_replace", "old_str": "old line", "new_str": "new"}}
    (place,) = locations("edit", str(source), tmp_path, edit)
    assert place.line == 3
    fifo = tmp_path / "pipe"
    __import__("os").mkfifo(fifo)
    (never,) = locations("edit", str(fifo), tmp_path, edit)  # a FIFO is never opened to wait
    assert never.line is None


def test_a_blocked_turn_tells_an_editor_user_what_to_do() -> None:
    """Issue 24 item 6: the blocked message told editor users to use `--ack-interrupted`."""
    from acp_server.updates import message
    from kernel.loop.resume import ACK_HINT

    summary = f"Interrupted calls have an unknown outcome: bash 'x'. Check them, then {ACK_HINT}."
    told = message(FinalData(status="blocked", summary=summary))
    assert told is not None
    assert "--ack-interrupted" not in told.content.text and "Acknowledge" in told.content.text


def test_thoughts_say_what_the_agent_does_between_calls() -> None:
    from protocol.events import (
        ArgumentOffloadData,
        CompletionReviewData,
        ModelStartedData,
        RouteData,
    )

    translator = Translator(WS)
    log = events(
        ModelStartedData(stage="route", model="jev"),
        RouteData(choice="bash", confidence=0.9, context_bytes=1, probabilities={"bash": 0.9}),
        ModelStartedData(stage="generate", model="flash"),
        ArgumentOffloadData(tool="read", policy="deterministic"),
        ModelStartedData(stage="completion_review", model="jev"),
        CompletionReviewData(
            choice="work_remains", confidence=0.7, context_bytes=1, probabilities={}
        ),
        ModelStartedData(stage="respond", model="flash"),
    )
    updates = [u for e in log for u in translator.live(e)]
    said = [u.content.text for u in updates if u.session_update == "agent_thought_chunk"]
    assert len(said) == 7  # one thought per step, each followed by the turn's plan (below)
    assert [u.session_update for u in updates] == ["agent_thought_chunk", "plan"] * 7
    assert said[1] == "Next: bash (confidence 0.90).\n"
    assert said[2] == "Writing the arguments for bash…\n" and "built in code" in said[3]
    assert said[5].startswith("Review: work remains") and said[6] == "Writing the answer…\n"


def test_the_plan_lists_the_steps_taken_and_the_one_under_way() -> None:
    """Issue 34 item 2: `plan` entries say what jmp is doing (choosing, reviewing, writing the
    arguments, running a call, writing the answer): never a `pending` step it cannot know, the
    last one `in_progress`, all `completed` when the turn ends (a cancelled step is dropped)."""
    from protocol.events import FinalData, ModelStartedData, RouteData

    translator = Translator(WS)
    log = events(
        UserData(text="run the tests"),
        ModelStartedData(stage="route", model="jev"),
        RouteData(choice="bash", confidence=0.9, context_bytes=1, probabilities={"bash": 0.9}),
        ModelStartedData(stage="generate", model="flash"),
        started("c1", target="pytest -q"),
    )
    plans = [u for e in log for u in translator.live(e) if u.session_update == "plan"]
    last = plans[-1].entries
    assert [(p.content, p.status) for p in last] == [
        ("Choose the next step: bash (0.90)", "completed"),
        ("Write the arguments for bash", "completed"),
        ("Run pytest -q", "in_progress"),
    ]
    assert all(p.priority == "medium" for p in last)
    assert not any(p.status == "pending" for plan in plans for p in plan.entries)
    again = Translator(WS)
    for e in log:
        again.live(e)
    (done,) = [
        u
        for e in events(FinalData(status="completed", summary="ok"))
        for u in translator.live(e)
        if u.session_update == "plan"
    ]
    assert {p.status for p in done.entries} == {"completed"}
    (cut,) = [
        u
        for e in events(FinalData(status="cancelled", summary=""))
        for u in again.live(e)
        if u.session_update == "plan"
    ]
    assert [p.content for p in cut.entries] == [p.content for p in last[:2]]


def test_a_rejected_call_replays_as_rejected_and_never_as_started() -> None:
    from protocol.events import ApprovalData

    log = events(
        UserData(text="go"),
        ApprovalData(call_id="c1", tool="bash", target="rm x", decision="rejected"),
    )
    _, rejected = list(Translator(WS).replay(log))
    assert rejected.session_update == "tool_call" and rejected.status == "failed"
    assert "rejected" in rejected.content[0].content.text and rejected.title == "Run rm x"


def test_initialize_before_the_sdk_is_what_the_sdk_would_say() -> None:
    """Item 7: acp_server/hello.py answers `initialize` before the SDK is loaded."""
    import acp
    from acp.schema import InitializeResponse

    from acp_server import hello

    assert hello.PROTOCOL_VERSION == acp.PROTOCOL_VERSION
    for asked in (1, 7, 0):
        raw = hello.result(asked, "1.2.3")
        model = InitializeResponse.model_validate(raw)
        dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
        assert dumped == raw and raw["protocolVersion"] == 1
    assert hello.early_version({"id": 1, "method": "initialize", "params": {}}) is None
    assert (
        hello.early_version({"id": 1, "method": "initialize", "params": {"protocolVersion": True}})
        is None
    )


def test_titles_skip_embedded_context_and_untitled_sessions_say_so(tmp_path: Path) -> None:
    """Issue 24 item 6: titles held the embedded context; a new session had no title."""
    from acp_server.listing import UNTITLED, session_infos
    from kernel.store.catalog import list_sessions
    from kernel.store.session import Session

    code = "x = '```'\n```\nnot the end\n"  # a fence inside the context cannot close it
    embedded = EmbeddedResourceContentBlock(
        type="resource", resource=TextResourceContents(uri="file:///w/b.py", text=code)
    )
    text = prompt_text([embedded, text_block("Explain this function")])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Session.create(tmp_path / "home", workspace) as prompted:
        prompted.append(UserData(text=text))
    Session.create(tmp_path / "home", workspace).close()
    infos = session_infos(list_sessions(tmp_path / "home"), str(workspace))
    titles = sorted(info.title or "" for info in infos)
    assert titles == ["Explain this function", UNTITLED], titles


def test_a_prompt_is_a_command_only_when_it_names_one() -> None:
    from acp_server import commands

    assert commands.parse("/compact") == commands.Command("compact")
    assert commands.parse("  /mode ask ") == commands.Command("mode", "ask")
    assert commands.parse("/acknowledge") == commands.Command("acknowledge")
    for request in ("/usr/bin/env is broken", "/compactify", "compact", "please /compact"):
        assert commands.parse(request) is None, request
    assert [c.name for c in commands.available(False)] == ["compact", "mode"]
    assert [c.name for c in commands.available(True)] == ["compact", "acknowledge", "mode"]


def test_usage_is_flash_s_last_request_against_the_context_budget() -> None:
    from acp_server.usage import UsageMeter
    from protocol.events import UsageData

    meter = UsageMeter(96000)
    jev = UsageData(
        provider="typesafe",
        stage="route",
        model="jev",
        seconds=0.1,
        usage={"input_tokens": 50, "output_tokens": 2},
    )
    assert meter.feed(jev) is None  # nothing before Flash has reported
    flash = UsageData(
        provider="deepseek",
        stage="respond",
        model="f",
        seconds=0.2,
        usage={"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320},
    )
    update = meter.feed(flash)
    assert update is not None and (update.used, update.size, update.cost) == (320, 96000, None)
    assert update.field_meta["jmp"]["inputTokens"] == 350
    assert update.field_meta["jmp"]["requests"] == 2
