"""JSON-RPC messages as `jmp --acp` checks and redacts them: pure functions, no I/O.

What a decoded line must be for the SDK to take it (`check_message`, else `Refused` with the
JSON-RPC error that names the problem), the id of a line too long to decode (`prefix_id`), and
which values of an outgoing message are text to redact and which are protocol (`scrub`). The
transport that applies them to the pipes is `acp_server/wire.py`.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any, Protocol

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

# Values that are protocol, not text: JSON-RPC's fields, and the ACP schema's ids,
# discriminators and enums (tests/acp/test_acp_units.py derives the schema's from the
# SDK's models and checks they are all here). `cwd` is the client's own path, echoed.
STRUCTURAL = frozenset(
    {
        "jsonrpc",
        "method",
        "id",
        "protocolVersion",
        "cwd",
        "errorClass",
        # discriminators and enums
        "action",
        "apiType",
        "category",
        "code",
        "kind",
        "mode",
        "outcome",
        "priority",
        "sessionUpdate",
        "status",
        "stopReason",
        "supported",
        "type",
        # ids
        "configId",
        "connectionId",
        "currentModeId",
        "elicitationId",
        "languageId",
        "messageId",
        "methodId",
        "modeId",
        "optionId",
        "planId",
        "providerId",
        "requestId",
        "serverId",
        "sessionId",
        "terminalId",
        "toolCallId",
    }
)
# Free JSON inside a message (tool input and output, extension data, an error's details): no
# field in it is protocol, so every string in it is redacted, whatever its key.
FREE = frozenset({"rawInput", "rawOutput", "_meta", "data"})


class Redacts(Protocol):
    def text(self, s: str) -> str: ...


def scrub(value: Any, redactor: Redacts, free: bool = False) -> Any:
    """A copy of a JSON value with every string value redacted; keys never, and the values of
    STRUCTURAL keys only inside FREE parts."""
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, list):
        return [scrub(item, redactor, free) for item in value]
    if isinstance(value, dict):
        return {
            key: item
            if not free and key in STRUCTURAL and not isinstance(item, dict | list)
            else scrub(item, redactor, free or key in FREE)
            for key, item in value.items()
        }
    return value


class Refused(Exception):
    """A line that is not a message: the error to answer with, and the id if it has one."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


def check_message(message: Any) -> dict[str, Any]:
    """A decoded line as the SDK may take it, or Refused naming what is wrong.

    A response whose `error` is not an object is passed on as an error response, so the
    request waiting for it ends (an unanswered request would wait forever).
    """
    if not isinstance(message, dict):
        raise Refused(
            INVALID_REQUEST,
            f"Invalid Request: a JSON-RPC message is an object; this line holds {_kind(message)}"
            " (batches are not supported)",
        )
    has_id = "id" in message
    request_id = message.get("id")
    if has_id and not usable_id(request_id):
        raise Refused(
            INVALID_REQUEST,
            f"Invalid Request: id must be a string, an integer or null, not {_kind(request_id)}",
        )
    if "method" in message:
        if not isinstance(message["method"], str):
            raise Refused(
                INVALID_REQUEST,
                f"Invalid Request: method must be a string, not {_kind(message['method'])}",
                request_id,
            )
        return message
    if not has_id:
        raise Refused(
            INVALID_REQUEST,
            "Invalid Request: a message needs a method (a request or notification) or an id "
            "(a response)",
        )
    error = message.get("error")
    if "result" not in message and error is not None and not isinstance(error, dict):
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": INVALID_REQUEST, "message": "the client's error is not an object"},
        }
    checked: dict[str, Any] = message
    return checked


def usable_id(value: Any) -> bool:
    """An id JSON-RPC allows and Python can key on: a string, a finite number, or null."""
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def overlong(prefix: bytes, limit: int) -> Refused | dict[str, Any]:
    """What a line discarded for its length becomes, from its first bytes: the error to answer
    a request with (with its id when that stands whole among its leading members, as SDKs
    write `jsonrpc`, `id`, `method` before `params`), or, for the client's response to one of
    our requests, an error response that ends our waiting request (answering it instead would
    look to the client like a reply to a request of its own with that id)."""
    members, cut = leading_members(prefix)
    request_id = members.get("id")
    usable = "id" in members and usable_id(request_id)
    message = (
        f"Invalid Request: a line of more than {limit:,} bytes was discarded "
        f"(jmp --acp reads JSON-RPC lines of up to {limit:,} bytes)"
    )
    error = {"code": INVALID_REQUEST, "message": message}
    if usable and "method" not in members and cut in ("result", "error"):
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    is_request = "method" in members or cut == "params"
    return Refused(INVALID_REQUEST, message, request_id if usable and is_request else None)


def leading_members(prefix: bytes) -> tuple[dict[str, Any], str | None]:
    """The members of a JSON object's first bytes that stand whole (`"id": 4` at the cut may
    be 45: not whole), and the key of the member the cut falls in (None if not found)."""
    decoder = json.JSONDecoder()
    text = prefix.decode("utf-8", "replace")
    members: dict[str, Any] = {}
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        return members, None
    at += 1
    key: Any = None
    with contextlib.suppress(ValueError, IndexError):
        while True:
            key = None
            key, at = decoder.raw_decode(text, _skip_space(text, at))
            at = _skip_space(text, at)
            if text[at] != ":":
                return members, None
            value, at = decoder.raw_decode(text, _skip_space(text, at + 1))
            at = _skip_space(text, at)
            if text[at] not in ",}":  # raises IndexError at the cut
                return members, None
            members[key] = value
            at += 1
    return members, key if isinstance(key, str) else None


def decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        raise Refused(PARSE_ERROR, "Parse error: the line is not UTF-8") from None
    except RecursionError:
        raise Refused(PARSE_ERROR, "Parse error: the line's JSON is nested too deeply") from None
    except ValueError as exc:
        raise Refused(PARSE_ERROR, f"Parse error: the line is not JSON ({exc})") from None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
