"""What an MCP call answered, as the tool worker reports it: result text, schema errors,
failure reasons. Pure functions over the `mcp` SDK's (and httpx's) types; no I/O."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import mcp.types


def success(server: str, result: mcp.types.CallToolResult) -> dict[str, Any]:
    """The fields of an ok ToolResult; an isError answer is ok too, marked in its text."""
    text = content_text(result)
    if result.isError:  # an answer, not a failure: the model should read what the server said
        text = f"[error result from MCP server {server!r}]\n{text}"
    return {"status": "ok", "text": text, "error": "", "exit_code": None}


def failure(error: str) -> dict[str, Any]:
    """The fields of an error ToolResult (the call has an end: it did not run, or stopped)."""
    return {"status": "error", "text": "", "error": error, "exit_code": None}


def content_text(result: mcp.types.CallToolResult) -> str:
    """Every content block as text; binary blocks as a one-line description."""
    parts = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp.types.ImageContent | mcp.types.AudioContent):
            parts.append(f"[{block.type}: {block.mimeType}, {len(block.data)} base64 chars]")
        elif isinstance(block, mcp.types.EmbeddedResource):
            resource = block.resource
            body = getattr(resource, "text", None)
            parts.append(body if body is not None else f"[resource {resource.uri}]")
        elif isinstance(block, mcp.types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    return "\n".join(parts)


def schema_error(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Why `args` do not meet the server's input schema, or None when they do."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(args))
    except jsonschema.exceptions.SchemaError as exc:
        return f"the server's input schema is invalid: {exc.message}"
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def is_transport_failure(exc: BaseException) -> bool:
    """A JSON-RPC error answer leaves the session usable; anything else means reconnect."""
    if isinstance(exc, mcp.McpError):
        return exc.error.code == mcp.types.CONNECTION_CLOSED
    return True


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and everything among its causes, groups and contexts, each once."""
    seen: set[int] = set()
    found: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        found.append(current)
        if isinstance(current, BaseExceptionGroup):
            todo += current.exceptions
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
    return found


def rpc_error(exc: BaseException) -> mcp.types.ErrorData | None:
    """The JSON-RPC error a server answered, wherever it sits among `exc`'s causes, groups and
    contexts; None when the server gave no answer (it exited, timed out, or was not found)."""
    for current in _chain(exc):
        if isinstance(current, mcp.McpError) and current.error.code != mcp.types.CONNECTION_CLOSED:
            return current.error
    return None


def http_status(exc: BaseException) -> int | None:
    """The HTTP status a remote server refused a request with, wherever it sits in `exc`."""
    for current in _chain(exc):
        if isinstance(current, httpx.HTTPStatusError):
            return current.response.status_code
    return None


def reason(exc: BaseException) -> str:
    """One readable line: the first leaf of an exception group, whitespace folded."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if type(exc).__name__ == "MCPTimeoutError":  # its later lines are generic advice
        return str(exc).splitlines()[0]
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def start_reason(exc: BaseException) -> str:
    """Why a server did not start, in words a user can act on."""
    text = reason(exc)
    if text == "Connection closed":  # all the SDK says when a stdio server exits at start
        return "the server exited during the MCP handshake (Connection closed); see its stderr"
    return text
