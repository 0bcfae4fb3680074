"""MCP through the whole CLI: routing, generation or offload, validation, redaction, limits."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jmp_lab.servers import MCP_SERVER
from tests.support.cli import Cli, finish, wait_for_line
from tests.support.mcp_http import serve_http

SERVER = MCP_SERVER
SECRET = "mcp-secret-value-8675309"
MODERN_PYTHON = Path(__file__).parents[1] / ".venv" / "mcp-2026-07-28" / "bin" / "python"
MODERN_SERVER = Path(SERVER).parent / "mcp_modern_server.py"


def configure(jmp: Cli, *extra_args: str, servers: dict[str, Any] | None = None) -> None:
    config = servers or {
        "fake": {
            "command": sys.executable,
            "args": [SERVER, *extra_args],
            "env": {"FAKE_TOKEN": SECRET, "FAKE_MCP_STDERR_ECHO": "FAKE_TOKEN"},
        }
    }
    path = jmp.tmp / "mcp.json"
    path.write_text(json.dumps({"mcpServers": config}))


def test_mcp_tools_generated_and_offloaded(jmp: Cli) -> None:
    configure(jmp)
    jmp.jev.script(
        [
            {"route": "mcp.echo"},
            {"route": "mcp.mode"},
            {"route": "mcp.getenv"},
            {"route": "done"},
            {"completion_review": "complete"},
        ]
    )
    jmp.flash.queue(
        [
            {"tool_call": {"arguments": {"text": "hi there"}}},
            {"tool_call": {"arguments": {"name": "FAKE_TOKEN"}}},
            {"text": "echoed"},
        ]
    )
    out = jmp.task("use the mcp tools")
    assert out.code == 0, out.stderr
    offered = jmp.jev.systemone_bodies()[0]["questions"]["route"]["criteria"]
    assert {"mcp.echo", "mcp.mode", "mcp.ping", "read", "recall"} <= set(offered)
    finished = {f["tool"]: f for f in out.of("tool_finished")}
    assert finished["mcp.echo"]["status"] == "ok" and "hi there" in finished["mcp.echo"]["text"]
    assert finished["mcp.mode"]["status"] == "ok"
    (offload,) = out.of("argument_offload")
    assert offload["tool"] == "mcp.mode" and offload["arguments"] == {"mode": "all", "depth": 2}
    assert offload["generation_call_skipped"] is True and offload["backend"] == "code"
    # two generated tools -> two generation requests; the fixed one made none
    tool_requests = [b for b in jmp.flash.completions() if b.get("tools")]
    assert len(tool_requests) == 2
    schema = tool_requests[0]["tools"][0]["function"]["parameters"]
    assert schema["required"] == ["text"] and "security_risk" not in schema["properties"]
    # the server printed its secret: it is redacted everywhere
    directory = jmp.home / out.result["session_id"]
    assert SECRET not in out.stdout and SECRET not in out.stderr
    assert "fake mcp server: [REDACTED]=[REDACTED]" in out.stderr  # the server's own log line
    for path in directory.rglob("*"):
        if path.is_file() and path.suffix in {".jsonl", ".json", ".txt"}:
            assert SECRET not in path.read_text(errors="replace"), path
    assert "[REDACTED]" in finished["mcp.getenv"]["text"]


def test_no_mcp_skips_the_servers(jmp: Cli) -> None:
    configure(jmp)
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "hi"}])
    out = jmp.task("hello", "--no-mcp")
    assert out.code == 0, out.stderr
    offered = jmp.jev.systemone_bodies()[0]["questions"]["route"]["criteria"]
    assert not [name for name in offered if name.startswith("mcp.")]


def test_more_than_250_tools_is_a_clear_error(jmp: Cli) -> None:
    configure(jmp, "--count", "251")
    out = jmp.task("anything")
    assert out.code == 2
    assert out.result["status"] == "error"
    assert "250" in out.result["summary"] and not jmp.jev.systemone_bodies()
    assert out.of("final")[-1]["status"] == "error"  # the session records why it stopped


def test_a_name_clash_between_servers_is_a_clear_error(jmp: Cli) -> None:
    one = {"command": sys.executable, "args": [SERVER]}
    configure(jmp, servers={"one": one, "two": dict(one)})
    out = jmp.task("anything")
    assert out.code == 2
    assert "one" in out.result["summary"] and "two" in out.result["summary"]


def test_a_broken_config_names_the_file_and_field(jmp: Cli) -> None:
    path: Path = jmp.tmp / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"fs": {"command": "x", "args": ["a", 3]}}}))
    out = jmp.task("anything")
    assert out.code == 2
    assert str(path) in out.stderr and "mcpServers.fs.args[1]" in out.stderr
    assert not jmp.home.exists() or not any(jmp.home.iterdir())


@pytest.mark.timeout(400)  # two cold runs of the CLI on a loaded 2-core machine
@pytest.mark.parametrize("revision", ["initialize", "2026-07-28"])
def test_an_mcp_server_killed_mid_call_leaves_the_call_uncertain(jmp: Cli, revision: str) -> None:
    """kill -9 of a real stdio MCP server while it serves a call: the call's effect is unknown,
    so it ends `tool_uncertain` (worker_exit, not acknowledged) and the run `blocked`, never
    `tool_finished`; --ack-interrupted then continues past it (docs/DECISIONS.md, MCP). The
    same for a server of MCP 2026-07-28 alone (the mcp 2.x SDK's, which refuses initialize)."""
    pid_file, mark = jmp.tmp / "mcp.pid", jmp.tmp / "sleeping"
    server = {
        "command": sys.executable,
        "args": [SERVER, "--pid-file", str(pid_file)],
        "env": {"FAKE_MCP_SLOW_MARK": str(mark)},
    }
    if revision != "initialize":
        if not MODERN_PYTHON.exists():
            pytest.skip(f"no mcp 2.x SDK in {MODERN_PYTHON.parent.parent} (make install puts it)")
        args = [str(MODERN_SERVER), "--modern-only", "--pid-file", str(pid_file)]
        server = {**server, "command": str(MODERN_PYTHON), "args": args}
    configure(jmp, servers={"fake": server})
    jmp.jev.script([{"route": "mcp.slow"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"seconds": 60}}}])
    proc = jmp.start("--workspace", str(jmp.workspace), "run the slow mcp call")
    lines = wait_for_line(proc, lambda line: line["kind"] == "tool_started", timeout=240)
    session, call_id = lines[-1]["session_id"], lines[-1]["data"]["call_id"]
    deadline = time.monotonic() + 30
    while not mark.exists() and time.monotonic() < deadline:  # the server is inside the call
        time.sleep(0.05)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    rest = wait_for_line(proc, lambda line: line["kind"] == "tool_uncertain", timeout=30)
    record = rest[-1]["data"]
    assert record["call_id"] == call_id and record["tool"] == "mcp.slow"
    assert record["cause"] == "worker_exit" and record["acknowledged"] is False
    assert "MCP server 'fake'" in record["note"] and record["mcp_server"] is True
    assert finish(proc) == 2
    log = jmp.log(session)
    assert not [e for e in log if e["kind"] == "tool_finished"]
    assert log[-1]["kind"] == "final" and log[-1]["data"]["status"] == "blocked"
    # acknowledged, the run goes on: the (restarted) server answers the next call
    jmp.jev.script([{"route": "mcp.echo"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"text": "back"}}}, {"text": "done"}])
    out = jmp.run("--session", session, "--ack-interrupted", timeout=240)
    assert out.code == 0, out.stderr
    assert [(u["acknowledged"], u["mcp_server"]) for u in out.of("tool_uncertain")] == [
        (True, True)
    ]
    (echo,) = out.of("tool_finished")
    assert echo["status"] == "ok" and "back" in echo["text"]


SPEC = json.loads((Path(__file__).parent / "harness/data/mcp-2026-07-28.schema.json").read_text())
FRAME_KINDS = {
    "server/discover": "DiscoverRequest",
    "tools/list": "ListToolsRequest",
    "tools/call": "CallToolRequest",
    "notifications/cancelled": "CancelledNotification",
}


@pytest.mark.timeout(400)  # three servers' startup and a cold run on a loaded 2-core machine
def test_jmps_client_reaches_servers_of_either_revision_in_one_run(jmp: Cli) -> None:
    """jmp's MCP client calls a tool of a server of each kind over stdio, in one run: the
    mcp 1.x SDK's (initialize only), the mcp 2.x SDK's by default (it serves both; OpenHands'
    fastmcp 3 reaches it over 2025-11-25) and the mcp 2.x SDK's serving MCP 2026-07-28 alone
    (it refuses initialize: workers/mcp/modern.py speaks to it). Every frame jmp sent the last
    is valid against that revision's schema.json, and what it returned is redacted."""
    if not MODERN_PYTHON.exists():
        pytest.skip(f"no mcp 2.x SDK in {MODERN_PYTHON.parent.parent} (make install puts it there)")
    frames = jmp.tmp / "frames.jsonl"
    newest = {
        "command": str(MODERN_PYTHON),
        "args": [str(MODERN_SERVER), "--modern-only", "--prefix", "new_"],
        "env": {"FAKE_MCP_FRAMES": str(frames), "FAKE_TOKEN": SECRET},
    }
    configure(
        jmp,
        servers={
            "legacy": {"command": sys.executable, "args": [SERVER, "--prefix", "old_"]},
            "modern": {"command": str(MODERN_PYTHON), "args": [str(MODERN_SERVER)]},
            "newest": newest,
        },
    )
    jmp.jev.script(
        [
            {"route": "mcp.old_echo"},
            {"route": "mcp.echo"},
            {"route": "mcp.new_echo"},
            {"route": "mcp.new_getenv"},
            {"route": "done"},
            {"completion_review": "complete"},
        ]
    )
    jmp.flash.queue(
        [
            {"tool_call": {"arguments": {"text": "from the old one"}}},
            {"tool_call": {"arguments": {"text": "from the new one"}}},
            {"tool_call": {"arguments": {"text": "from the newest"}}},
            {"tool_call": {"arguments": {"name": "FAKE_TOKEN"}}},
            {"text": "all answered"},
        ]
    )
    out = jmp.task("call every server", timeout=300)
    assert out.code == 0, out.stderr
    assert not out.of("error"), out.of("error")  # no server failed to start
    finished = {f["tool"]: f for f in out.of("tool_finished")}
    assert finished["mcp.old_echo"]["status"] == "ok"
    assert "from the old one" in finished["mcp.old_echo"]["text"]
    modern = finished["mcp.echo"]
    assert modern["status"] == "ok" and "from the new one (MCP 2025-11-25)" in modern["text"]
    newest_echo = finished["mcp.new_echo"]
    assert newest_echo["status"] == "ok"
    assert "from the newest (MCP 2026-07-28)" in newest_echo["text"]
    getenv = finished["mcp.new_getenv"]["text"]
    assert "[REDACTED]" in getenv and SECRET not in getenv
    assert SECRET not in out.stdout and SECRET not in out.stderr
    sent = [json.loads(line) for line in frames.read_text().splitlines()]
    assert sent[0]["method"] == "initialize"  # refused: then a new process, 2026-07-28 only
    assert [f["method"] for f in sent[1:]] == [
        "server/discover",
        "tools/list",
        "tools/call",
        "tools/call",
    ]
    for frame in sent[1:]:
        schema = {**SPEC, "$ref": f"#/$defs/{FRAME_KINDS[frame['method']]}"}
        jsonschema.Draft202012Validator(schema).validate(frame)


@pytest.mark.timeout(400)  # two servers' startup and a cold run on a loaded 2-core machine
def test_jmps_client_reaches_remote_servers_of_either_revision_in_one_run(jmp: Cli) -> None:
    """The same over Streamable HTTP, in one run: the mcp 1.x SDK's server (initialize only)
    and the mcp 2.x SDK's serving MCP 2026-07-28 alone (its own 2026-07-28 HTTP entry, which
    refuses initialize with HTTP 400: workers/mcp/modern.py POSTs to it at that revision).
    The config's header (a secret the server requires) reaches it and never the output; every
    frame jmp sent it after the refusal is valid against the revision's schema.json."""
    if not MODERN_PYTHON.exists():
        pytest.skip(f"no mcp 2.x SDK in {MODERN_PYTHON.parent.parent} (make install puts it there)")
    frames = jmp.tmp / "frames.jsonl"
    base = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    new_env = {**base, "FAKE_MCP_FRAMES": str(frames), "FAKE_TOKEN": SECRET}
    new_env["FAKE_MCP_REQUIRE_HEADER"] = f"Authorization: Bearer {SECRET}"
    new_cmd = [str(MODERN_PYTHON), str(MODERN_SERVER), "--modern-only", "--prefix", "new_"]
    new, new_url = serve_http(jmp.tmp / "new.port", new_cmd, new_env)
    old, old_url = serve_http(
        jmp.tmp / "old.port", [sys.executable, SERVER, "--prefix", "old_"], base
    )
    try:
        configure(
            jmp,
            servers={
                "legacy": {"url": old_url},
                "newest": {"url": new_url, "headers": {"Authorization": f"Bearer {SECRET}"}},
            },
        )
        jmp.jev.script(
            [
                {"route": "mcp.old_echo"},
                {"route": "mcp.new_echo"},
                {"route": "mcp.new_getenv"},
                {"route": "done"},
                {"completion_review": "complete"},
            ]
        )
        jmp.flash.queue(
            [
                {"tool_call": {"arguments": {"text": "from the old one"}}},
                {"tool_call": {"arguments": {"text": "from the newest"}}},
                {"tool_call": {"arguments": {"name": "FAKE_TOKEN"}}},
                {"text": "all answered"},
            ]
        )
        out = jmp.task("call every server", timeout=300)
    finally:
        for process in (new, old):
            process.kill()
            process.wait()
    assert out.code == 0, out.stderr
    assert not out.of("error"), out.of("error")  # no server failed to start
    finished = {f["tool"]: f for f in out.of("tool_finished")}
    assert finished["mcp.old_echo"]["status"] == "ok"
    assert "from the old one" in finished["mcp.old_echo"]["text"]
    newest_echo = finished["mcp.new_echo"]
    assert newest_echo["status"] == "ok"
    assert "from the newest (MCP 2026-07-28)" in newest_echo["text"]
    getenv = finished["mcp.new_getenv"]["text"]
    assert "[REDACTED]" in getenv and SECRET not in getenv
    assert SECRET not in out.stdout and SECRET not in out.stderr
    lines = [json.loads(line) for line in frames.read_text().splitlines()]
    sent, headers = lines[::2], [line["headers"] for line in lines[1::2]]
    assert sent[0]["method"] == "initialize"  # refused (HTTP 400): then 2026-07-28 only
    assert [f["method"] for f in sent[1:]] == [
        "server/discover",
        "tools/list",
        "tools/call",
        "tools/call",
    ]
    for frame, mirrored in zip(sent[1:], headers[1:], strict=True):
        schema = {**SPEC, "$ref": f"#/$defs/{FRAME_KINDS[frame['method']]}"}
        jsonschema.Draft202012Validator(schema).validate(frame)
        assert mirrored["mcp-protocol-version"] == "2026-07-28"
        assert mirrored["mcp-method"] == frame["method"]
