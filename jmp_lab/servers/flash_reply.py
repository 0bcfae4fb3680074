"""OpenAI-shaped chat completion bodies and SSE chunks for the Flash test server."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

TOOL_NAME = "selected_action"


def minimal_value(schema: Any, root: dict[str, Any] | None = None) -> Any:
    """A small value satisfying `schema`'s required fields (const, enum, default, type)."""
    if not isinstance(schema, dict):
        return None
    root = root if root is not None else schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return minimal_value(target, root)
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return minimal_value(schema[key][0], root)
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _minimal_of_type(kind, schema, root)


def _minimal_of_type(kind: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    if kind == "object":
        props = schema.get("properties", {})
        return {
            name: minimal_value(props.get(name, {}), root) for name in schema.get("required", [])
        }
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    return {"string": "", "boolean": False, "array": [], "null": None}.get(kind)


def default_item(body: dict[str, Any]) -> dict[str, Any]:
    """The reply when the queue is empty: a minimal tool call with tools, else "Done."."""
    tools = body.get("tools") or []
    if not tools:
        return {"text": "Done."}
    params = (tools[0].get("function") or {}).get("parameters") or {}
    value = minimal_value(params)
    return {"tool_call": {"arguments": value if isinstance(value, dict) else {}}}


def _call_head(item: dict[str, Any]) -> tuple[str, str]:
    """(call id, function name): an item's optional `id` and `name`, else call_0 and TOOL_NAME."""
    call = item["tool_call"]
    return str(call.get("id") or "call_0"), str(call.get("name") or TOOL_NAME)


def _arguments_text(item: dict[str, Any]) -> str:
    args = item["tool_call"]["arguments"]
    return args if isinstance(args, str) else json.dumps(args)


def _usage(body: dict[str, Any], output: str) -> dict[str, Any]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = len(output) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": prompt,
    }


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunk(body: dict[str, Any], reply_id: str, delta: dict[str, Any], finish: str | None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": reply_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "fp_jmp_test",
        "choices": [choice],
    }


def _deltas(item: dict[str, Any], size: int) -> tuple[list[dict[str, Any]], str, str]:
    """(deltas, finish_reason, output text) for a scripted item."""
    if "tool_call" not in item:
        text = item["text"]
        first = [{"role": "assistant", "content": ""}]
        return first + [{"content": piece} for piece in _split(text, size)], "stop", text
    args = _arguments_text(item)
    call_id, name = _call_head(item)
    head = {"index": 0, "id": call_id, "type": "function"}
    first = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**head, "function": {"name": name, "arguments": ""}}],
    }
    rest = [
        {"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in _split(args, size)
    ]
    return [first, *rest], "tool_calls", args


def build_chunks(
    body: dict[str, Any], item: dict[str, Any], reply_id: str, size: int
) -> list[bytes]:
    """The SSE events of a streamed reply, `data: [DONE]` last."""
    deltas, finish, output = _deltas(item, size)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chunks = [_chunk(body, reply_id, d, None) for d in deltas]
    chunks.append(_chunk(body, reply_id, {}, finish))
    if include_usage:
        for c in chunks:
            c["usage"] = None
        chunks.append(
            {**_chunk(body, reply_id, {}, None), "choices": [], "usage": _usage(body, output)}
        )
    events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]
    return [*events, b"data: [DONE]\n\n"]


def build_completion(body: dict[str, Any], item: dict[str, Any], reply_id: str) -> dict[str, Any]:
    """A non-streamed chat.completion body."""
    if "tool_call" in item:
        output = _arguments_text(item)
        call_id, name = _call_head(item)
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": output}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        output = item["text"]
        message, finish = {"role": "assistant", "content": output}, "stop"
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": _usage(body, output),
    }


def flood_events(
    body: dict[str, Any], item: dict[str, Any], reply_id: str, chars: int, piece: int
) -> Iterator[bytes]:
    """SSE events of a reply that streams `chars` characters ("y"s) of answer, or of a tool
    call's `command` argument, then finishes; `chars` 0 streams without end."""

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return b"data: " + json.dumps(_chunk(body, reply_id, delta, finish)).encode() + b"\n\n"

    tool = "tool_call" in item
    if tool:
        call_id, name = _call_head(item)
        head = {"index": 0, "id": call_id, "type": "function"}
        call = {**head, "function": {"name": name, "arguments": '{"command": "'}}
        yield event({"role": "assistant", "content": None, "tool_calls": [call]})
    else:
        yield event({"role": "assistant", "content": ""})
    text = "y" * piece
    sent = 0
    for _ in itertools.count():
        if chars and sent >= chars:
            break
        sent += piece
        if tool:
            yield event({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})
        else:
            yield event({"content": text})
    if tool:
        yield event({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]})
    yield event({}, "tool_calls" if tool else "stop")
    yield b"data: [DONE]\n\n"
