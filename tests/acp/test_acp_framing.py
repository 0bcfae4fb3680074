"""`jmp --acp` on the raw wire against a client that sends what it should not (issue 20, 7-9):
secrets that spell protocol words, lines that are no message, strings no path can hold,
sessions that are not jmp's. Every frame it writes stays valid ACP and it serves on."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from jmp_lab.servers import MCP_SERVER
from tests.acp.helpers import Wire, check_acp_frame, only_updates
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)

SERVER = MCP_SERVER
SECRET = "acp-client-secret-Vq83Lm"
# Client env values that are also JSON-RPC keys, ACP field names, methods and enum values
# (and longer than the redactor's minimum): before, each one rewrote every frame's structure.
PROTOCOL_WORDS = (
    "result",
    "session",
    "completed",
    "content",
    "execute",
    "end_turn",
    "agent_message_chunk",
    "tool_call_update",
    "jsonrpc",
    "params",
)


def text(words: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": words}]


def check_frames(wire: Wire, methods: dict[int, str]) -> None:
    for frame in wire.frames():
        check_acp_frame(frame, methods.get(frame.get("id", -1)) if "method" not in frame else None)


def updates(wire: Wire, session: str, start: int = 0) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in wire.frames()[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == session
    ]


def said(wire: Wire, session: str, start: int = 0) -> list[str]:
    found = updates(wire, session, start)
    return [u["content"]["text"] for u in found if u["sessionUpdate"] == "agent_message_chunk"]


def test_client_secrets_redact_text_only_and_only_in_their_own_session(jmp: Cli) -> None:
    """Issue 20 item 7: an editor's MCP env values `result`, `session`, the workspace path
    ... are redacted as text in that session's frames and record; no key, method, enum or id
    changes, no other session's frame changes, and `cwd` stays the path."""
    workspace = str(jmp.workspace.resolve())
    values = [*PROTOCOL_WORDS, workspace, SECRET]
    env = [{"name": f"VALUE_{i}", "value": value} for i, value in enumerate(values)]
    server = {"name": "fake", "command": sys.executable, "args": [SERVER], "env": env}
    sentence = f"The result of this session: completed, end_turn, in {workspace}"
    done = [{"route": "done"}, {"completion_review": "complete"}]
    jmp.jev.script([{"route": "bash"}, *done, *done])
    jmp.flash.queue(
        [
            {"tool_call": {"arguments": {"command": f"echo '{sentence}' {SECRET}"}}},
            {"text": f"{sentence} ({SECRET})."},
            {"text": f"{sentence}."},
        ]
    )
    wire = Wire(jmp)
    methods: dict[int, str] = {}

    def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        methods[wire.next_id + 1] = method
        reply = wire.call(method, params)
        assert "error" not in reply, reply
        return dict(reply["result"])

    try:
        call("initialize", {"protocolVersion": 1})
        mine = call("session/new", {"cwd": workspace, "mcpServers": [server]})["sessionId"]
        other = call("session/new", {"cwd": workspace, "mcpServers": []})["sessionId"]
        assert call("session/prompt", {"sessionId": mine, "prompt": text("go")}) == {
            "stopReason": "end_turn"
        }
        assert call("session/prompt", {"sessionId": other, "prompt": text("go")}) == {
            "stopReason": "end_turn"
        }
        listed = call("session/list", {"cwd": workspace})["sessions"]
        start = len(wire.lines)
        call("session/load", {"sessionId": mine, "cwd": workspace, "mcpServers": [server]})
        replayed = said(wire, mine, start)
    finally:
        code, rest = wire.close()
    assert code == 0 and only_updates(rest)
    check_frames(wire, methods)
    assert {(s["sessionId"], s["cwd"]) for s in listed} == {(mine, workspace), (other, workspace)}

    # the other session's text is its own: nothing of the first client's is a secret there
    assert said(wire, other) == [f"{sentence}."]
    # the first session's texts, live and replayed, have every value of its client redacted
    ends = [u for u in updates(wire, mine) if u["sessionUpdate"] == "tool_call_update"]
    assert [u["status"] for u in ends] == ["completed", "completed"]  # live, replayed
    assert len(replayed) == 1
    for shown in [*said(wire, mine), *(u["content"][0]["content"]["text"] for u in ends)]:
        assert "[REDACTED]" in shown
        assert not any(value in shown for value in values), shown
    everything = b"".join(wire.lines) + wire.stderr_path.read_bytes()
    assert SECRET.encode() not in everything
    log = jmp.log(mine)  # the record holds the run, whatever the secrets spell
    assert [e["data"]["status"] for e in log if e["kind"] == "final"] == ["completed"]
    assert [e["data"]["status"] for e in log if e["kind"] == "tool_finished"] == ["ok"]
    assert SECRET not in (jmp.home / mine / "events.jsonl").read_text()


LINE_LIMIT = 16 * 1024 * 1024  # acp_server.wire.MAX_LINE_BYTES (what the docs promise)
OVERLONG = (
    b'{"jsonrpc":"2.0","id":41,"method":"session/list","params":{"cwd":"/'
    + (b"a" * LINE_LIMIT)
    + b'"}}'
)
BAD_LINES = [  # (line, the error code answered, the id it is answered with)
    (b"[1]", -32600, None),
    (b"1", -32600, None),
    (b"null", -32600, None),
    (b'"session/new"', -32600, None),
    (b"{}", -32600, None),
    (b'[{"jsonrpc":"2.0","id":30,"method":"session/list","params":{}}]', -32600, None),
    (b'{"jsonrpc":"2.0","id":[31],"method":"session/list","params":{}}', -32600, None),
    (b'{"jsonrpc":"2.0","id":32,"method":5}', -32600, 32),
    (b"not json", -32700, None),
    (b'{"jsonrpc":"2.0","id":33,"method":"session/list"', -32700, None),
    (b"\xff\xfe{}", -32700, None),
    (b"[" * 100_000, -32700, None),
    (OVERLONG, -32600, 41),
]


def test_lines_that_are_no_message_get_an_error_and_the_server_serves_on(jmp: Cli) -> None:
    """Issue 20 item 8 (and issue 24 item 5): before, `[1]` ended the process with every
    session, a non-JSON line got no answer, and an over-long line was read whole."""
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "Still here."}])
    wire = Wire(jmp)
    try:
        wire.call("initialize", {"protocolVersion": 1})
        opened = wire.call("session/new", {"cwd": str(jmp.workspace), "mcpServers": []})
        session = opened["result"]["sessionId"]
        for line, code, request_id in BAD_LINES:
            wire.send_line(line)
            reply = wire.read()
            while "method" in reply:  # the new session's own updates (issue 34) come first
                reply = wire.read()
            assert reply["error"]["code"] == code and reply["id"] == request_id, (line[:80], reply)
            assert reply["error"]["message"].startswith(("Parse error: ", "Invalid Request: "))
        assert "16,777,216 bytes" in reply["error"]["message"]  # the over-long line's
        # a malformed response (its error is no object) is no request: nothing answers it
        wire.send_line(b'{"jsonrpc":"2.0","id":0,"error":"no"}')
        done = wire.call("session/prompt", {"sessionId": session, "prompt": text("and now?")})
        assert done["result"] == {"stopReason": "end_turn"}
        assert wire.call("session/list", {})["result"]["sessions"][0]["sessionId"] == session
    finally:
        code, rest = wire.close()
    assert code == 0 and rest == b""
    stderr = wire.stderr_path.read_text()
    assert "Traceback" not in stderr and "refused a line from the client" in stderr
    assert [e["data"]["status"] for e in jmp.log(session) if e["kind"] == "final"] == ["completed"]


def stdio(**changes: Any) -> dict[str, Any]:
    server = {"name": "s", "command": sys.executable, "args": [SERVER], "env": []}
    return server | changes


BAD_STRINGS = [  # (session/new params but cwd, the field the error must begin with)
    ({"cwd": "/tmp\x00/x"}, "cwd contains a NUL"),
    ({"cwd": "/tmp/\ud800"}, "cwd contains a lone surrogate (U+D800)"),
    ({"mcpServers": [stdio(name="a\x00b")]}, "mcpServers[0].name contains a NUL"),
    ({"mcpServers": [stdio(), stdio(name="t", command="py\x00")]}, "mcpServers[1].command"),
    ({"mcpServers": [stdio(args=[SERVER, "\udcff"])]}, "mcpServers[0].args[1] contains a lone"),
    ({"mcpServers": [stdio(env=[{"name": "A=B", "value": "v"}])]}, "mcpServers[0].env[0].name"),
    (
        {"mcpServers": [stdio(env=[{"name": "A", "value": "v"}, {"name": "B", "value": "\x00"}])]},
        "mcpServers[0].env[1].value contains a NUL",
    ),
    (
        {"mcpServers": [{"type": "http", "name": "h", "url": "http://x/\x00", "headers": []}]},
        "mcpServers[0].url contains a NUL",
    ),
    (
        {
            "mcpServers": [
                {
                    "type": "http",
                    "name": "h",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": [{"name": "X-Token", "value": "a\r\nInjected: yes"}],
                }
            ]
        },
        "mcpServers[0].headers[0].value contains a line break",
    ),
]


def test_harness_sessions_and_strings_no_path_can_hold_are_invalid_params(jmp: Cli) -> None:
    """Issue 20 item 9: `session/load` opened a jev-harness session (the CLI refuses it), and a
    NUL in `cwd` was an internal error. Both are invalid params naming the problem; the
    harness session's log is not touched (not even its torn tail archived); the Python API
    refuses it with the CLI's own message."""
    from kernel.errors import UsageError
    from kernel.store.session import Session

    workspace = str(jmp.workspace)
    harness = Session.create(jmp.home, jmp.workspace, created_by="jev-harness")
    sid = harness.id
    harness.close()
    log = jmp.home / sid / "events.jsonl"
    with log.open("ab") as torn:
        torn.write(b'{"version":1,"session_id":')  # an opening would archive it and record it
    before = (log.read_bytes(), sorted(p.name for p in log.parent.iterdir()))

    wire = Wire(jmp)
    try:
        wire.call("initialize", {"protocolVersion": 1})
        refused = wire.call("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
        assert refused["error"]["code"] == -32602, refused
        assert f"`jev-harness inspect {sid}`" in refused["error"]["message"]
        for changes, field in BAD_STRINGS:
            params = {"cwd": workspace, "mcpServers": []} | changes
            reply = wire.call("session/new", params)
            assert reply.get("error", {}).get("code") == -32602, (field, reply)
            assert reply["error"]["message"].startswith(field), reply
        nul = f"{workspace}\x00"
        for method, params in [
            ("session/load", {"sessionId": sid, "cwd": nul, "mcpServers": []}),
            ("session/list", {"cwd": nul}),
        ]:
            reply = wire.call(method, params)
            assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith(
                "cwd contains a NUL"
            ), reply
        fine = wire.call("session/new", {"cwd": workspace, "mcpServers": [stdio()]})
        assert "sessionId" in fine["result"]
    finally:
        code, _ = wire.close()
    assert code == 0
    assert "Traceback" not in wire.stderr_path.read_text()
    assert (log.read_bytes(), sorted(p.name for p in log.parent.iterdir())) == before

    with pytest.raises(UsageError) as api:
        Session.open(jmp.home, sid)
    assert str(api.value) == refused["error"]["message"]
    cli = jmp.run("--session", sid, "go on")
    assert cli.code == 2 and str(api.value) in cli.stderr
    assert (log.read_bytes(), sorted(p.name for p in log.parent.iterdir())) == before
