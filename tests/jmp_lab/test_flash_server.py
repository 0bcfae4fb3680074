"""The loopback OpenAI-compatible server: SSE wire format, scripted replies, faults, CLI."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import openai
import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.flash_reply import minimal_value

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "timeout": {"type": ["integer", "null"], "minimum": 1},
        "mode": {"enum": ["run", "view"]},
        "nested": {"$ref": "#/$defs/Inner"},
    },
    "required": ["command", "timeout", "mode", "nested"],
    "$defs": {"Inner": {"type": "object", "properties": {"k": {"const": 3}}, "required": ["k"]}},
}
TOOLS = [{"type": "function", "function": {"name": "selected_action", "parameters": SCHEMA}}]


def raw_post(url: str, body: dict[str, Any], path: str = "/v1/chat/completions") -> tuple[int, str]:
    """One raw POST with http.client, so the exact wire bytes can be checked."""
    parts = urlparse(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def events(sse: str) -> list[Any]:
    """The `data:` payloads of an SSE body, `[DONE]` kept as a string."""
    blocks = [b for b in sse.split("\n\n") if b]
    assert all(b.startswith("data: ") for b in blocks), blocks
    return [b[6:] if b[6:] == "[DONE]" else json.loads(b[6:]) for b in blocks]


def chat(stream: bool = True, usage: bool = True, tools: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
        if usage:
            body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = TOOLS
    return body


def client_for(flash: FlashServer, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url=flash.url, max_retries=retries)


@pytest.fixture
def flash() -> Any:
    with FlashServer() as server:
        yield server


def test_tool_call_stream_is_openai_shaped_and_split(flash: FlashServer) -> None:
    arguments = {"command": "ls -la /tmp", "timeout": 5}
    flash.queue([{"tool_call": {"arguments": arguments}}])
    status, body = raw_post(flash.url, chat(tools=True))
    evs = events(body)
    assert status == 200 and evs[-1] == "[DONE]"
    chunks = evs[:-1]
    first = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
    assert first["id"] and first["type"] == "function"
    assert first["function"]["name"] == "selected_action"
    pieces = [
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        for c in chunks[1:]
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert len(pieces) > 2 and json.loads("".join(pieces)) == arguments
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_usage_chunk_only_when_asked(flash: FlashServer) -> None:
    _, body = raw_post(flash.url, chat(usage=False))
    assert all("usage" not in e for e in events(body)[:-1])


def test_text_reply_through_the_openai_sdk(flash: FlashServer) -> None:
    flash.queue([{"text": "Hello there, this is a longer answer."}])
    with client_for(flash) as client, client.chat.completions.create(**chat()) as stream:
        parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
        completion = client.chat.completions.create(**chat(stream=False))
    assert "".join(parts) == "Hello there, this is a longer answer." and len(parts) > 3
    assert completion.choices[0].message.content == "Done."  # queue empty: default
    assert completion.usage is not None and completion.model == "m1"


def test_both_paths_and_models_endpoint(flash: FlashServer) -> None:
    assert raw_post(flash.url, chat(), path="/chat/completions")[0] == 200
    with client_for(flash) as client:
        assert [m.id for m in client.models.list()] == ["deepseek-v4-flash"]
    assert len(flash.completions()) == 1


def test_default_tool_reply_satisfies_required_fields(flash: FlashServer) -> None:
    _, body = raw_post(flash.url, chat(stream=False, tools=True))
    call = json.loads(body)["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == minimal_value(SCHEMA)
    assert minimal_value(SCHEMA) == {"command": "", "timeout": 1, "mode": "run", "nested": {"k": 3}}


def test_http500_fault_then_recovery_with_retry_after(flash: FlashServer) -> None:
    flash.fault("http500", count=2)
    with client_for(flash, retries=1) as client:
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(**chat(stream=False))
        assert client.chat.completions.create(**chat(stream=False)).choices[0].message.content
    assert len(flash.completions()) == 3


def test_invalid_json_fault_breaks_only_the_arguments(flash: FlashServer) -> None:
    flash.fault("invalid_json")
    _, body = raw_post(flash.url, chat(stream=False, tools=True))
    arguments = json.loads(body)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)


def test_cut_fault_closes_mid_body(flash: FlashServer) -> None:
    flash.fault("cut", after_chunks=2)
    with pytest.raises(http.client.IncompleteRead):
        raw_post(flash.url, chat())
    assert raw_post(flash.url, chat())[0] == 200  # the next request is whole


def test_drop_fault_sends_nothing(flash: FlashServer) -> None:
    flash.fault("drop")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        raw_post(flash.url, chat())


def test_clear_faults_drops_the_unused_ones(flash: FlashServer) -> None:
    flash.fault("http500", count=4)
    assert raw_post(flash.url, chat())[0] == 500
    assert flash.clear_faults() == 3
    assert raw_post(flash.url, chat())[0] == 200


def test_slow_fault_delays_every_chunk(flash: FlashServer) -> None:
    flash.queue([{"text": "x" * 24}])  # 8-char pieces: role chunk + 3 + finish + usage + DONE
    flash.fault("slow", seconds=0.05)
    started = time.monotonic()
    status, body = raw_post(flash.url, chat())
    assert status == 200 and len(events(body)) == 7
    assert time.monotonic() - started >= 7 * 0.05


def test_queue_refuses_malformed_items(flash: FlashServer) -> None:
    with pytest.raises(ValueError):
        flash.queue([{"tool_call": {}}])


def test_records_requests(flash: FlashServer) -> None:
    raw_post(flash.url, chat(tools=True))
    (recorded,) = flash.requests
    assert recorded["path"] == "/v1/chat/completions" and recorded["body"]["tools"] == TOOLS


def test_cli_serves(short_tmp: Path) -> None:
    queue = short_tmp / "queue.json"
    queue.write_text(json.dumps([{"text": "from the file"}]))
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "jmp_lab.servers.flash",
        "--port",
        str(port),
        "--queue",
        str(queue),
    ]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert f"127.0.0.1:{port}/v1" in proc.stdout.readline()
        status, body = raw_post(f"http://127.0.0.1:{port}", chat(stream=False))
        assert (
            status == 200
            and json.loads(body)["choices"][0]["message"]["content"] == "from the file"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
