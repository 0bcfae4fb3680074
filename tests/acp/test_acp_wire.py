"""`jmp --acp` on the raw wire: stdout is JSON-RPC only, keys never leave, EOF exits 0 clean."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.acp.helpers import Wire, left_running, only_updates
from tests.support.cli import FLASH_KEY, JEV_KEY, ROOT, Cli

# Each test starts real ACP processes and workers; on a loaded shared machine that alone
# can take a minute, so the per-test limit is wider than the suite default.
pytestmark = pytest.mark.timeout(300)


def test_stdout_is_json_rpc_only_and_eof_exits_zero_with_nothing_left(jmp: Cli) -> None:
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue(
        [
            {"tool_call": {"arguments": {"command": f"echo printing {FLASH_KEY}; echo done"}}},
            {"text": f"The key was {FLASH_KEY}."},
        ]
    )
    wire = Wire(jmp)
    assert wire.call("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    new = wire.call("session/new", {"cwd": str(jmp.workspace), "mcpServers": []})
    session = new["result"]["sessionId"]
    text = f"print my key {FLASH_KEY} and {JEV_KEY}"
    prompt = [{"type": "text", "text": text}]
    done = wire.call("session/prompt", {"sessionId": session, "prompt": prompt})
    assert done["result"]["stopReason"] == "end_turn"
    load = wire.call(
        "session/load", {"sessionId": session, "cwd": str(jmp.workspace), "mcpServers": []}
    )
    assert load["result"] is not None or "error" not in load
    code, rest = wire.close()
    assert code == 0 and only_updates(rest)
    frames = [json.loads(line) for line in wire.lines + rest.splitlines(keepends=True)]
    assert all(frame["jsonrpc"] == "2.0" for frame in frames)
    updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    replayed = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert replayed == ["print my key [REDACTED] and [REDACTED]"]
    outputs = json.dumps(updates)
    assert "printing [REDACTED]" in outputs and "The key was [REDACTED]." in outputs
    stderr = wire.stderr_path.read_bytes()
    for secret in (FLASH_KEY, JEV_KEY):
        assert secret.encode() not in b"".join(wire.lines) and secret.encode() not in stderr
    assert not left_running(jmp)  # workers and their shells are gone, the lock is free
    lock = jmp.home / session / "lock"
    assert lock.read_text() == ""  # released: the holder's pid is cleared


def test_acp_takes_no_prompt_or_session_option(jmp: Cli) -> None:
    for extra in (["a prompt"], ["--session", "0" * 32], ["--list"], ["--workspace", "."]):
        proc = subprocess.run(
            [sys.executable, str(ROOT / "main.py"), "--acp", *extra],
            env=jmp.env(),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 2, extra
        assert "--acp takes no" in proc.stderr and proc.stdout == ""


def test_every_line_on_stdout_passes_the_redactor(jmp: Cli) -> None:
    """Issue 9 item 2: a session stored before a key was known (an older jmp, or a key set
    later) is listed and loaded without it; every JSON-RPC line passes the redactor."""
    late_key = "deepseek-late-Qm3Xr8Vt1Lp6"
    source = ROOT / "tests" / "data" / "events" / "v1" / "basic.jsonl"
    sid = "5f0c2a9e8b7d4c6a9e1f3b2d7c8a6e40"
    text = source.read_text().replace("/home/dev/projects/calc", str(jmp.workspace))
    text = text.replace("My key is [REDACTED].", f"My key is {late_key}.")
    (jmp.home / sid).mkdir(parents=True)
    (jmp.home / sid / "events.jsonl").write_text(text)
    jmp.extra_env["DEEPSEEK_API_KEY"] = late_key  # set beside FLASH_API_KEY: unused, a secret
    wire = Wire(jmp)
    try:
        wire.call("initialize", {"protocolVersion": 1})
        listed = wire.call("session/list", {"cwd": str(jmp.workspace)})
        (info,) = listed["result"]["sessions"]
        assert info["sessionId"] == sid and "[REDACTED]" in info["title"]
        loaded = wire.call(
            "session/load", {"sessionId": sid, "cwd": str(jmp.workspace), "mcpServers": []}
        )
        assert "error" not in loaded, loaded
    finally:
        code, rest = wire.close()
    everything = b"".join(wire.lines) + rest
    assert code == 0 and late_key.encode() not in everything
    assert b"[REDACTED]" in b"".join(wire.lines[2:])  # the replayed request
