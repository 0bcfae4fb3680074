"""workers.mcp.toolset against real stdio MCP servers (jmp_lab/servers/mcp_server.py), started
by the SDK."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from jmp_lab.servers import MCP_SERVER
from jmp_lab.servers.mcp_server import DEFAULT_TOOLS
from tests.support.mcp_http import serve_http
from workers.mcp.toolset import (
    MAX_MCP_TOOLS,
    TOOL_LIMIT,
    EffectUnknown,
    McpToolset,
    UnknownTool,
    start_toolset,
)

FAKE = MCP_SERVER
ROOT = Path(__file__).resolve().parents[2]


def fake(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"command": sys.executable, "args": [FAKE, *args], "env": env or {}}


def server_processes(ignore: set[int] | None = None) -> list[psutil.Process]:
    """Live fake MCP servers anywhere below this test process, except the `ignore` pids."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            alive = child.status() != psutil.STATUS_ZOMBIE
            if alive and FAKE in child.cmdline() and child.pid not in (ignore or set()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    """The pids still alive (zombies count as gone) after waiting up to timeout_s."""
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p) and not _zombie(p)]
        if alive:
            time.sleep(0.05)
    return alive


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def is_fixed(schema: dict[str, Any]) -> bool:
    """CONTRACT 7's offload rule: every value of the schema is fixed."""
    if "const" in schema or schema.get("type") == "null":
        return True
    if isinstance(schema.get("enum"), list) and len(schema["enum"]) == 1:
        return True
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        return False
    properties = schema.get("properties", {})
    return set(schema.get("required", [])) == set(properties) and all(
        is_fixed(p) for p in properties.values()
    )


@pytest.fixture(scope="module")
def toolset() -> Iterator[McpToolset]:
    """One healthy server, one that exits at start, one whose command does not exist."""
    config = {
        "mcpServers": {
            "alpha": fake(env={"FAKE_TOKEN": "tok-secret-42"}),
            "broken": fake("--fail-start"),
            "missing": {"command": "/nonexistent/mcp-server-x", "args": []},
        }
    }
    # The servers' start is not what these tests check: a bound that a loaded machine meets
    # (the default 30 s was missed by the fixture under two test processes, 9 tests failing)
    started = start_toolset(config, start_timeout_s=120.0)
    try:
        yield started
    finally:
        started.close()


def ends_by_timeout_and_cancel(toolset: Any) -> list[str]:
    """A slow 2026-07-28 call ends at its timeout, another at its cancel, and the server still
    answers after both: what did not hold (empty: all did), for either transport."""
    wrong = []
    result = toolset.call("mcp.slow", {"seconds": 60}, threading.Event(), timeout_s=0.5)
    if not (result["status"] == "error" and "timed out after 0.5 s" in result["error"]):
        wrong.append(f"timeout: {result}")
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    result = toolset.call("mcp.slow", {"seconds": 60}, cancel)
    if not (result["status"] == "error" and "cancelled" in result["error"]):
        wrong.append(f"cancel: {result}")
    still = toolset.call("mcp.echo", {"text": "still"})
    if still.get("text") != "still (MCP 2026-07-28)":
        wrong.append(f"after both: {still}")
    return wrong


def test_specs_carry_the_servers_own_schemas_and_mcp_names(toolset: McpToolset) -> None:
    specs = {spec.name: spec for spec in toolset.specs}
    assert set(specs) == {f"mcp.{name}" for name in DEFAULT_TOOLS}
    for name, (description, schema) in DEFAULT_TOOLS.items():
        spec = specs[f"mcp.{name}"]
        assert spec.parameters == schema  # nothing injected: no summary, no security_risk
        assert spec.description == description
        assert spec.source == "mcp:alpha"


def test_fixed_schema_tools_stay_fixed_so_the_kernel_can_offload(toolset: McpToolset) -> None:
    specs = {spec.name: spec.parameters for spec in toolset.specs}
    assert is_fixed(specs["mcp.ping"]) and is_fixed(specs["mcp.mode"])
    assert not is_fixed(specs["mcp.echo"])
    result = toolset.call("mcp.mode", {"mode": "all", "depth": 2}, threading.Event())
    assert result["text"] == "mode=all depth=2"


def test_failed_servers_are_reported_and_the_others_work(toolset: McpToolset) -> None:
    assert set(toolset.failed) == {"broken", "missing"}
    assert toolset.failed["missing"] == "command not found: /nonexistent/mcp-server-x"
    assert "exited during the MCP handshake" in toolset.failed["broken"]
    assert all(spec.source == "mcp:alpha" for spec in toolset.specs)
    assert toolset.call("mcp.ping", {}, threading.Event())["text"] == "pong"


def test_call_with_arguments(toolset: McpToolset) -> None:
    result = toolset.call("mcp.echo", {"text": "hi", "times": 3}, threading.Event())
    assert result == {"status": "ok", "text": "hi hi hi", "error": "", "exit_code": None}
    assert toolset.call("mcp.add", {"a": 2, "b": 3.5})["text"] == "5.5"


def test_env_reaches_the_server(toolset: McpToolset) -> None:
    assert toolset.call("mcp.getenv", {"name": "FAKE_TOKEN"})["text"] == "tok-secret-42"


def test_application_error_is_an_ok_result_with_content_kept(toolset: McpToolset) -> None:
    result = toolset.call("mcp.fail", {}, threading.Event())
    assert result["status"] == "ok" and result["error"] == ""
    assert result["text"].endswith("\nboom: the widget is jammed")
    assert "error result from MCP server 'alpha'" in result["text"]


def test_validate_uses_the_input_schema(toolset: McpToolset) -> None:
    assert toolset.validate("mcp.echo", {"text": "x"}) == ({"text": "x"}, "alpha")
    # a null optional field is dropped rather than sent to the server
    assert toolset.validate("mcp.echo", {"text": "x", "times": None})[0] == {"text": "x"}
    with pytest.raises(ValueError, match="'text' is a required property"):
        toolset.validate("mcp.echo", {"times": 2})
    with pytest.raises(ValueError, match="times: 0 is less than the minimum of 1"):
        toolset.validate("mcp.echo", {"text": "x", "times": 0})
    with pytest.raises(ValueError, match="Additional properties are not allowed"):
        toolset.validate("mcp.ping", {"extra": 1})
    with pytest.raises(ValueError, match="'all' was expected"):
        toolset.validate("mcp.mode", {"mode": "some", "depth": 2})
    with pytest.raises(UnknownTool, match=r"mcp\.nope"):
        toolset.validate("mcp.nope", {})


@pytest.mark.slow  # asserts a wall-clock bound
def test_slow_call_times_out_and_cancel_is_honoured(toolset: McpToolset) -> None:
    started = time.monotonic()
    result = toolset.call("mcp.slow", {"seconds": 60}, threading.Event(), timeout_s=0.5)
    assert result["status"] == "error" and "timed out after 0.5 s" in result["error"]
    assert time.monotonic() - started < 5
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    result = toolset.call("mcp.slow", {"seconds": 60}, cancel)
    assert result["status"] == "error" and "cancelled" in result["error"]
    assert time.monotonic() - started < 5
    assert toolset.call("mcp.echo", {"text": "still here"})["text"] == "still here"


@pytest.mark.slow  # asserts a wall-clock bound
def test_server_crash_mid_call_is_effect_unknown_then_the_server_restarts() -> None:
    before = {p.pid for p in server_processes()}
    toolset = start_toolset({"mcpServers": {"c": fake()}})
    try:
        [first] = toolset.server_pids()
        started = time.monotonic()
        with pytest.raises(EffectUnknown, match="MCP server 'c' was lost during crash"):
            toolset.call("mcp.crash", {}, threading.Event())
        assert time.monotonic() - started < 10
        assert toolset.call("mcp.echo", {"text": "back"})["text"] == "back"
        assert toolset.server_pids() != [first]
    finally:
        toolset.close()
    assert server_processes(ignore=before) == []


def test_close_leaves_no_server_process_even_during_a_call() -> None:
    before = {p.pid for p in server_processes()}
    toolset = start_toolset({"mcpServers": {"a": fake(), "b": fake("--prefix", "b_")}})
    pids = toolset.server_pids()
    assert len(pids) == 2
    assert {p.pid for p in server_processes(ignore=before)} == set(pids)
    caller = threading.Thread(target=toolset.call, args=("mcp.slow", {"seconds": 60}))
    caller.start()
    toolset.close()
    caller.join(10)
    assert not caller.is_alive()
    assert wait_gone(pids, timeout_s=1) == []
    assert server_processes(ignore=before) == []


def test_name_clash_between_servers_is_rejected() -> None:
    before = {p.pid for p in server_processes()}
    with pytest.raises(
        ValueError, match=r"'echo' is offered by both server 'one' and server 'two'"
    ):
        start_toolset({"mcpServers": {"one": fake(), "two": fake()}})
    assert server_processes(ignore=before) == []


@pytest.mark.parametrize("counts", [[TOOL_LIMIT + 1], [200, TOOL_LIMIT - 200]])
def test_more_tools_than_the_limit_is_rejected(counts: list[int]) -> None:
    before = {p.pid for p in server_processes()}
    servers = {f"s{i}": fake("--count", str(n), "--prefix", f"s{i}_") for i, n in enumerate(counts)}
    with pytest.raises(ValueError, match=r"more than the limit of 250.*smaller MCP configuration"):
        start_toolset({"mcpServers": servers})
    assert server_processes(ignore=before) == []


def test_the_limit_itself_is_accepted() -> None:
    toolset = start_toolset({"mcpServers": {"big": fake("--count", str(MAX_MCP_TOOLS))}})
    try:
        assert len(toolset.specs) == MAX_MCP_TOOLS == TOOL_LIMIT - 1  # recall makes 250
    finally:
        toolset.close()


def test_no_servers_is_an_empty_toolset() -> None:
    toolset = start_toolset({"mcpServers": {}})
    assert toolset.specs == [] and toolset.failed == {}
    toolset.close()


@pytest.fixture
def http_server(short_tmp: Path) -> Iterator[str]:
    """A fake MCP server over streamable HTTP that wants header X-Key; yields its URL."""
    port_file = short_tmp / "port"
    env = {**os.environ, "FAKE_MCP_REQUIRE_HEADER": "X-Key: hdr-secret-77"}
    process = subprocess.Popen([sys.executable, FAKE, "--http-port-file", str(port_file)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert port_file.exists(), "the HTTP MCP server did not start"
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.kill()
        process.wait()


def test_remote_server_with_headers(http_server: str) -> None:
    config = {
        "web": {"url": http_server, "headers": {"X-Key": "hdr-secret-77"}},
        "nokey": {"url": http_server, "transport": "streamable-http"},
    }
    toolset = start_toolset({"mcpServers": config})
    try:
        assert "401" in toolset.failed["nokey"] and list(toolset.failed) == ["nokey"]
        assert {spec.source for spec in toolset.specs} == {"mcp:web"}
        assert toolset.call("mcp.echo", {"text": "over http"})["text"] == "over http"
        assert toolset.server_pids() == []
    finally:
        toolset.close()


HOST = """
import sys, time
from workers.mcp.toolset import start_toolset
toolset = start_toolset({"mcpServers": {"a": %r, "b": %r}})
print(*toolset.server_pids(), flush=True)
toolset.call("mcp.block", {"seconds": 60})
"""


def test_killed_host_leaves_no_orphan_server(short_tmp: Path) -> None:
    """SIGKILL the toolset's process during a call that blocks its server: no server survives.

    A blocked server never notices its stdin closing, so only PR_SET_PDEATHSIG can end it.
    """
    mark = short_tmp / "slow-started"
    env = {"FAKE_MCP_SLOW_MARK": str(mark)}
    code = HOST % (fake(env=env), fake("--prefix", "b_"))
    host = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert host.stdout is not None
        pids = [int(p) for p in host.stdout.readline().split()]
        assert len(pids) == 2
        # the servers are in the host's process tree, not daemonized elsewhere
        tree = {p.pid for p in psutil.Process(host.pid).children(recursive=True)}
        assert set(pids) <= tree
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert mark.exists(), "the slow call never started"
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        assert wait_gone(pids) == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()


def test_tool_worker_killed_during_mcp_call_leaves_no_orphan(short_tmp: Path) -> None:
    """Through kernel.supervision.tools.Tools: MCP tools are listed and called, and a SIGKILLed
    tool worker (mid-call, its server blocked) leaves no MCP server behind."""
    from kernel.config.mcp import load_servers
    from kernel.supervision.supervisor import WorkerDied
    from kernel.supervision.tools import Tools

    mark = short_tmp / "blocked"
    config = {"mcpServers": {"fx": fake(env={"FAKE_MCP_SLOW_MARK": str(mark)})}}
    (short_tmp / "mcp.json").write_text(json.dumps(config))
    (short_tmp / "ws").mkdir()
    tools = Tools(short_tmp / "ws", short_tmp / "terminal", load_servers(short_tmp / "mcp.json"))
    outcome: list[BaseException | object] = []
    try:
        names = {spec.name: spec for spec in tools.specs()}
        assert names["mcp.ping"].source == "mcp:fx" and "read" in names
        assert tools.validate("mcp.echo", {"text": "x"}).target == "fx"
        assert tools.run("c1", "mcp.echo", {"text": "via kernel"}).text == "via kernel"
        worker_pid = tools.worker.pid
        assert worker_pid is not None

        def call() -> None:
            try:
                outcome.append(tools.run("c2", "mcp.block", {"seconds": 60}))
            except BaseException as exc:
                outcome.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        server_pid = int(mark.read_text())
        server = psutil.Process(server_pid)
        assert server_pid in {p.pid for p in psutil.Process(worker_pid).children(recursive=True)}
        assert server.environ().get("JMP_WORKER_TOKEN")  # the kernel's tree net sees it
        os.kill(worker_pid, signal.SIGKILL)
        caller.join(30)
        assert not caller.is_alive()
        assert isinstance(outcome[0], WorkerDied)
        assert wait_gone([server_pid]) == []
    finally:
        tools.close()


MODERN_PYTHON = ROOT / ".venv" / "mcp-2026-07-28" / "bin" / "python"
MODERN_SERVER = str(ROOT / "jmp_lab" / "servers" / "mcp_modern_server.py")
SPEC = json.loads((ROOT / "tests" / "harness" / "data" / "mcp-2026-07-28.schema.json").read_text())
FRAME_KINDS = {
    "server/discover": "DiscoverRequest",
    "tools/list": "ListToolsRequest",
    "tools/call": "CallToolRequest",
    "notifications/cancelled": "CancelledNotification",
}


def modern_only(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The mcp 2.x SDK's server serving MCP 2026-07-28 alone (it refuses `initialize`)."""
    if not MODERN_PYTHON.exists():
        pytest.skip(f"no mcp 2.x SDK in {MODERN_PYTHON.parent.parent} (make install puts it there)")
    server_args = [MODERN_SERVER, "--modern-only", *args]
    return {"command": str(MODERN_PYTHON), "args": server_args, "env": env or {}}


def spec_valid(frame: dict[str, Any], definition: str) -> None:
    """`frame` is a valid `definition` of MCP 2026-07-28's own schema.json."""
    import jsonschema

    jsonschema.Draft202012Validator({**SPEC, "$ref": f"#/$defs/{definition}"}).validate(frame)


def test_a_server_of_mcp_2026_07_28_alone_beside_an_initialize_one(short_tmp: Path) -> None:
    """A server that refuses `initialize` is started again at 2026-07-28 (server/discover, the
    envelope on every request) and keeps what the initialize path guarantees: calls, env,
    timeout, cancel (told to the server), a crash mid-call is EffectUnknown then a restart,
    and close() during a call leaves no process. Every frame sent validates against the
    revision's schema.json."""
    frames, mark = short_tmp / "frames.jsonl", short_tmp / "slow"
    env = {"FAKE_MCP_FRAMES": str(frames), "FAKE_TOKEN": "tok-secret-42"}
    env["FAKE_MCP_SLOW_MARK"] = str(mark)
    config = {"new": modern_only(env=env), "old": fake("--prefix", "old_")}
    toolset = start_toolset({"mcpServers": config}, start_timeout_s=120.0)
    caller = None
    try:
        assert toolset.failed == {}
        assert toolset.revisions == {"new": "2026-07-28", "old": "initialize"}
        specs = {spec.name: spec for spec in toolset.specs}
        assert {"mcp.echo", "mcp.slow", "mcp.crash", "mcp.getenv", "mcp.old_echo"} <= set(specs)
        assert specs["mcp.echo"].source == "mcp:new"
        assert specs["mcp.echo"].parameters["required"] == ["text"]
        assert toolset.call("mcp.echo", {"text": "hi"})["text"] == "hi (MCP 2026-07-28)"
        assert toolset.call("mcp.old_echo", {"text": "hi"})["text"] == "hi"
        assert toolset.call("mcp.getenv", {"name": "FAKE_TOKEN"})["text"] == "tok-secret-42"
        assert not ends_by_timeout_and_cancel(toolset)
        first = set(toolset.server_pids())
        with pytest.raises(EffectUnknown, match="MCP server 'new' was lost during crash"):
            toolset.call("mcp.crash", {}, threading.Event())
        assert toolset.call("mcp.echo", {"text": "back"})["text"] == "back (MCP 2026-07-28)"
        pids = toolset.server_pids()
        assert len(pids) == 2 and set(pids) != first
        mark.unlink()
        caller = threading.Thread(target=toolset.call, args=("mcp.slow", {"seconds": 60}))
        caller.start()
        wait_until_exists(mark)
    finally:
        toolset.close()
    caller.join(10)
    assert not caller.is_alive()
    assert wait_gone(pids, timeout_s=1) == []
    sent = [json.loads(line) for line in frames.read_text().splitlines()]
    # the initialize that was refused, then (a new process) the 2026-07-28 frames only
    assert sent[0]["method"] == "initialize"
    assert [f["method"] for f in sent[1:3]] == ["server/discover", "tools/list"]
    for frame in sent[1:]:
        spec_valid(frame, FRAME_KINDS[frame["method"]])
    calls = {f["id"]: f["params"] for f in sent if f["method"] == "tools/call"}
    meta = next(iter(calls.values()))["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "jmp"
    told = [f["params"]["requestId"] for f in sent if f["method"] == "notifications/cancelled"]
    slow = [i for i, params in calls.items() if params["name"] == "slow"]
    assert told == slow[:2]  # the timed-out call and the cancelled one; close() is no cancel


def wait_until_exists(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), f"{path} never appeared"


# A stdio server of the wire format alone: "future" serves only a revision jmp does not know
# (-32022 to everything, naming it); "refuses" answers initialize with an error and every
# other method -32601, as a server of no revision jmp speaks.
REFUSER = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    params = msg.get("params") or {}
    asked = (params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
    if sys.argv[1] == "future":
        data = {"supported": ["2099-01-01"], "requested": asked or params.get("protocolVersion")}
        error = {"code": -32022, "message": "Unsupported protocol version", "data": data}
    elif msg["method"] == "initialize":
        error = {"code": -32603, "message": "this server is out of order"}
    else:
        error = {"code": -32601, "message": "Method not found"}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}), flush=True)
"""


def test_servers_that_refuse_initialize_and_share_no_revision_fail_with_their_reason() -> None:
    refuser = {"command": sys.executable, "args": ["-c", REFUSER]}
    config = {
        "future": {**refuser, "args": [*refuser["args"], "future"]},
        "broken": {**refuser, "args": [*refuser["args"], "refuses"]},
    }
    toolset = start_toolset({"mcpServers": config}, start_timeout_s=120.0)
    try:
        assert set(toolset.failed) == {"future", "broken"} and toolset.specs == []
        assert toolset.failed["future"] == (
            "the server serves MCP 2099-01-01; jmp's client speaks 2026-07-28 and the "
            "initialize revisions 2024-11-05 to 2025-11-25"
        )
        # not a 2026-07-28 server either (server/discover: -32601): the handshake's reason
        assert toolset.failed["broken"] == "this server is out of order"
    finally:
        toolset.close()


def test_a_remote_server_of_mcp_2026_07_28_alone_beside_an_initialize_one(
    short_tmp: Path,
) -> None:
    """A Streamable HTTP server that refuses `initialize` (the mcp 2.x SDK's own 2026-07-28
    HTTP entry: HTTP 400) is spoken to at 2026-07-28 over HTTP: one POST per request with the
    envelope and the request metadata headers (the SDK checks them against the body, -32020
    otherwise), the config's headers on every POST (the server wants X-Key), a timeout and a
    cancel close the response stream (no notifications/cancelled), and a failure reason is
    redacted. Every frame sent validates against the revision's schema.json."""
    modern_only()  # skips without the mcp 2.x SDK
    frames = short_tmp / "frames.jsonl"
    secret = "hdr-secret-2026"
    base = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    new_env = {
        **base,
        "FAKE_MCP_FRAMES": str(frames),
        "FAKE_MCP_REQUIRE_HEADER": f"X-Key: {secret}",
    }
    new, new_url = serve_http(
        short_tmp / "new.port", [str(MODERN_PYTHON), MODERN_SERVER, "--modern-only"], new_env
    )
    old, old_url = serve_http(
        short_tmp / "old.port", [sys.executable, FAKE, "--prefix", "old_"], base
    )
    config = {
        "new": {"url": new_url, "headers": {"X-Key": secret}},
        "old": {"url": old_url, "transport": "streamable-http"},
        "nokey": {"url": new_url},
    }
    toolset = start_toolset({"mcpServers": config}, start_timeout_s=120.0)
    try:
        assert list(toolset.failed) == ["nokey"] and "401" in toolset.failed["nokey"]
        assert toolset.revisions == {"new": "2026-07-28", "old": "initialize"}
        specs = {spec.name: spec for spec in toolset.specs}
        assert {"mcp.echo", "mcp.slow", "mcp.getenv", "mcp.old_echo"} <= set(specs)
        assert specs["mcp.echo"].source == "mcp:new"
        assert toolset.call("mcp.echo", {"text": "hi"})["text"] == "hi (MCP 2026-07-28)"
        assert toolset.call("mcp.old_echo", {"text": "hi"})["text"] == "hi"
        assert not ends_by_timeout_and_cancel(toolset)
        # an x-mcp-header parameter is mirrored (non-ASCII: base64); the SDK checks it
        answer = toolset.call("mcp.region", {"region": "Zürich", "text": "hi"})
        assert answer["text"] == "hi in Zürich", answer
        assert toolset.server_pids() == []  # remote servers have no process of ours
    finally:
        toolset.close()
        for process in (new, old):
            process.kill()
            process.wait()
    lines = [json.loads(line) for line in frames.read_text().splitlines()]
    sent = list(zip(lines[::2], [h["headers"] for h in lines[1::2]], strict=True))
    # the refused initialize of "new", then 2026-07-28 only ("nokey" was refused with 401)
    assert sent[0][0]["method"] == "initialize"
    modern_frames = [(f, h) for f, h in sent[1:] if f.get("method") != "initialize"]
    assert [f["method"] for f, _ in modern_frames[:2]] == ["server/discover", "tools/list"]
    assert "notifications/cancelled" not in {f["method"] for f, _ in modern_frames}
    for frame, headers in modern_frames:
        spec_valid(frame, FRAME_KINDS[frame["method"]])
        assert headers["mcp-protocol-version"] == "2026-07-28"
        assert headers["mcp-method"] == frame["method"]
        if frame["method"] == "tools/call":
            assert headers["mcp-name"] == frame["params"]["name"]
    calls = [f["params"]["name"] for f, _ in modern_frames if f["method"] == "tools/call"]
    assert calls == ["echo", "slow", "slow", "echo", "region"]
    assert modern_frames[-1][1]["mcp-param-region"] == "=?base64?WsO8cmljaA==?="


def test_x_mcp_header_annotations_follow_the_revisions_rules() -> None:
    """Which `x-mcp-header` annotations a tool may carry, and how values become headers."""
    from workers.mcp.modern import InvalidHeaderParam, header_params, header_value

    ok = {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}
    nested = {"properties": {"o": {"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}}}
    assert header_params(ok) == {("a",): "A"}
    assert header_params(nested) == {("o", "n"): "N"}
    bad = [
        {"items": {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}},
        {"properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}},
        {
            "properties": {
                "a": {"type": "string", "x-mcp-header": "A"},
                "b": {"type": "string", "x-mcp-header": "a"},
            }
        },
        {"type": "string", "x-mcp-header": "Root"},
    ]
    for schema in bad:
        with pytest.raises(InvalidHeaderParam):
            header_params(schema)
    assert header_value("us-west1") == "us-west1"
    assert header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert header_value("line1\nline2") == "=?base64?bGluZTEKbGluZTI=?="
    assert header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
