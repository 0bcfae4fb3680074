"""The schema check itself (tests/acp/schema_check.py): it passes what the schema names and
fails what it does not, so that the check every ACP test ends with can fail."""

from __future__ import annotations

from typing import Any

from tests.acp.helpers import FrameLog
from tests.acp.schema_check import problems

UPDATE = {
    "jsonrpc": "2.0",
    "method": "session/update",
    "params": {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Run ls",
            "kind": "execute",
            "status": "in_progress",
            "locations": [{"path": "/w/a.py", "line": 3}],
            "rawInput": {"anything": {"goes": 1}},
            "_meta": {"free": True},
        },
    },
}


def with_update(**fields: Any) -> dict[str, Any]:
    update = {**UPDATE["params"]["update"], **fields}  # type: ignore[index]
    return {**UPDATE, "params": {"sessionId": "s1", "update": update}}


def test_a_valid_frame_passes_and_free_json_stays_free() -> None:
    assert problems(UPDATE, "agent") == []


def test_a_field_the_schema_does_not_name_fails_even_where_it_allows_more() -> None:
    (found,) = problems(with_update(lineNumber=3), "agent")
    assert "params.update.lineNumber" in found and "does not name" in found
    location = [{"path": "/w/a.py", "line": 3, "column": 1}]
    (found,) = problems(with_update(locations=location), "agent")
    assert "locations[0].column" in found


def test_a_frame_that_breaks_the_schema_fails() -> None:
    assert problems(with_update(status="running"), "agent")  # not a ToolCallStatus
    assert problems({"jsonrpc": "2.0", "method": "session/updates", "params": {}}, "agent")
    assert problems({"jsonrpc": "1.0", "id": 1, "result": {}}, "agent", "session/cancel")
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "done"}}
    assert problems(reply, "agent", "session/prompt")  # not a StopReason
    assert problems({"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}}, "agent")


def test_replies_are_checked_against_the_request_they_answer() -> None:
    log = FrameLog("unit")
    log.add("client", {"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {}})
    log.add("agent", {"jsonrpc": "2.0", "id": 7, "result": {"sessionId": "s", "extra": 1}})
    found = log.problems()
    assert [("cwd" in p, "mcpServers" in p, "result.extra" in p) for p in found] == [
        (True, False, False),  # the request lacks cwd and mcpServers
        (False, True, False),
        (False, False, True),  # the reply names a field the schema does not
    ]
