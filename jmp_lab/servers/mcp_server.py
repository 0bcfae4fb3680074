"""A real stdio MCP server (the `mcp` SDK's low-level Server) whose tools misbehave on request.

    python jmp_lab/servers/mcp_server.py [--prefix P] [--count N] [--fail-start] [--pid-file PATH]
                                     [--http-port-file PATH]

Default tools (each name gets the prefix): echo, add, ping (closed empty schema), mode (const-only
schema), fail (an isError result inside a successful response), slow (sleeps `seconds`), block
(blocks the whole server for `seconds`), crash (the server exits mid-call), getenv (reads one
variable of the server's environment).
`--count N` serves N generated tools `tool_0000`... instead. `--fail-start` exits before speaking.
`--pid-file` writes the server's pid once it serves (tests find the process by it).
`--http-port-file` serves streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio.
Env FAKE_MCP_SLOW_MARK=PATH: slow and block create PATH when they start sleeping.
Env FAKE_MCP_STDERR_ECHO=NAME: print NAME=<value> to stderr at start (a server leaking a secret).
Env FAKE_MCP_WITNESS=PATH: also serve `witness` (appends "<id> <unix time>" to PATH, then sleeps
`seconds`): the chaos runner's proof that a call ran, and how often.
Env FAKE_MCP_STDERR_ARGS=1: print its whole command line to stderr at start (`--api-key K` and
`--note TEXT` are accepted and ignored, so a test can pass secrets as arguments).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ECHO_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "what to echo"},
        "times": {"type": "integer", "minimum": 1, "default": 1},
    },
    "required": ["text"],
    "additionalProperties": False,
}
ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
PING_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}
MODE_SCHEMA = {
    "type": "object",
    "properties": {"mode": {"const": "all"}, "depth": {"type": "integer", "enum": [2]}},
    "required": ["mode", "depth"],
    "additionalProperties": False,
}
SECONDS_SCHEMA = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0}},
    "required": ["seconds"],
}
WITNESS_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "seconds": {"type": "number", "minimum": 0}},
    "required": ["id", "seconds"],
}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

DEFAULT_TOOLS = {
    "echo": ("Echo the text back, `times` times.", ECHO_SCHEMA),
    "add": ("Add two numbers.", ADD_SCHEMA),
    "ping": ("Answer pong. Takes no arguments.", PING_SCHEMA),
    "mode": ("Report the fixed mode.", MODE_SCHEMA),
    "fail": ("Always answer with an application error.", EMPTY_SCHEMA),
    "slow": ("Sleep for `seconds`, then answer.", SECONDS_SCHEMA),
    "block": ("Block the whole server for `seconds` (it reads nothing meanwhile).", SECONDS_SCHEMA),
    "crash": ("Kill the server in the middle of the call.", EMPTY_SCHEMA),
    "getenv": ("Read a variable of the server's environment.", NAME_SCHEMA),
}


def tool_table(prefix: str, count: int | None) -> dict[str, tuple[str, dict[str, Any]]]:
    """The tools this server advertises: name -> (description, input schema)."""
    if count is not None:
        return {
            f"{prefix}tool_{i:04d}": (f"Generated tool {i}.", EMPTY_SCHEMA) for i in range(count)
        }
    table = {prefix + name: spec for name, spec in DEFAULT_TOOLS.items()}
    if os.environ.get("FAKE_MCP_WITNESS"):
        table[prefix + "witness"] = ("Record that this call ran, then sleep.", WITNESS_SCHEMA)
    return table


async def run_tool(kind: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Do what the tool named `kind` does (the prefix is already stripped)."""
    if kind == "echo":
        return _text(" ".join([arguments["text"]] * arguments.get("times", 1)))
    if kind == "add":
        return _text(str(arguments["a"] + arguments["b"]))
    if kind == "ping":
        return _text("pong")
    if kind == "mode":
        return _text(f"mode={arguments['mode']} depth={arguments['depth']}")
    if kind == "fail":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="boom: the widget is jammed")],
            isError=True,
        )
    if kind == "slow":
        _mark()
        await anyio.sleep(arguments["seconds"])
        return _text(f"slept {arguments['seconds']}")
    if kind == "block":  # a server stuck in sync code: it cannot even see its stdin close
        _mark()
        time.sleep(arguments["seconds"])
        return _text(f"blocked {arguments['seconds']}")
    if kind == "crash":
        sys.stderr.write("fake mcp server: crashing on purpose\n")
        os._exit(17)
    if kind == "witness":  # one line per execution, written before the sleep
        with open(os.environ["FAKE_MCP_WITNESS"], "a", encoding="utf-8") as out:
            out.write(f"{arguments['id']} {time.time():.6f}\n")
        await anyio.sleep(arguments["seconds"])
        return _text(f"witnessed {arguments['id']}")
    if kind == "getenv":
        return _text(os.environ.get(arguments["name"], "<unset>"))
    return _text(f"{kind} done")


def _mark() -> None:
    mark = os.environ.get("FAKE_MCP_SLOW_MARK")
    if mark:
        Path(mark).write_text(str(os.getpid()))


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def build(prefix: str, count: int | None) -> Server:
    """A low-level server, so the advertised input schemas are exactly ours."""
    table = tool_table(prefix, count)
    server: Server = Server("fake-mcp")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=name, description=desc, inputSchema=schema)
            for name, (desc, schema) in table.items()
        ]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        kind = name.removeprefix(prefix) if count is None else "generated"
        return await run_tool(kind, arguments or {})

    return server


async def serve(server: Server) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Server, port_file: str, required_header: str) -> None:
    """Streamable HTTP on 127.0.0.1 at /mcp; with FAKE_MCP_REQUIRE_HEADER="Name: value" set,
    requests without that header get 401."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=server, stateless=True)
    name, _, value = required_header.partition(":")
    wanted = (name.strip().lower().encode(), value.strip().encode())

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and name and wanted not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing credential"})
            return
        await manager.handle_request(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on, so the port file means "ready"
    Path(port_file).write_text(str(sock.getsockname()[1]))
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    async with manager.run():
        await uvicorn.Server(config).serve(sockets=[sock])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefix", default="")
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--fail-start", action="store_true")
    parser.add_argument("--pid-file", default=None)
    parser.add_argument("--http-port-file", default=None, help="serve HTTP, write the port here")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--note", default=None)
    options = parser.parse_args()
    if os.environ.get("FAKE_MCP_STDERR_ARGS"):  # a careless server that logs its arguments
        sys.stderr.write(f"fake mcp server: argv={sys.argv!r}\n")
        sys.stderr.flush()
    if options.fail_start:
        sys.stderr.write("fake mcp server: refusing to start\n")
        return 3
    if options.pid_file:
        Path(options.pid_file).write_text(str(os.getpid()))
    if os.environ.get("FAKE_MCP_STDERR_ECHO"):  # a careless server that logs a secret
        name = os.environ["FAKE_MCP_STDERR_ECHO"]
        sys.stderr.write(f"fake mcp server: {name}={os.environ.get(name, '')}\n")
        sys.stderr.flush()
    server = build(options.prefix, options.count)
    if options.http_port_file:
        required = os.environ.get("FAKE_MCP_REQUIRE_HEADER", "")
        anyio.run(serve_http, server, options.http_port_file, required)
    else:
        anyio.run(serve, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
