"""An MCP server of the stateless revision, 2026-07-28, over stdio or HTTP, with the mcp 2.x SDK.

    .venv/mcp-2026-07-28/bin/python jmp_lab/servers/mcp_modern_server.py [--modern-only]
                                    [--prefix P] [--pid-file PATH] [--http-port-file PATH]

Run by the Python of `make install`'s `.venv/mcp-2026-07-28` (the mcp 2.x SDK cannot be
imported beside jmp's mcp 1.x); `jmp_lab/servers/mcp_server.py` is its 1.x (initialize-only)
counterpart. By default the SDK's `MCPServer` serves both eras on one stdio connection, as the
client's first request decides (`server/discover` with the 2026-07-28 envelope, or
`initialize`). `--modern-only` serves 2026-07-28 and nothing else: every frame goes to the
SDK's own 2026-07-28 serving loop, which answers `initialize` -32022 naming the versions it
serves (what a server of that revision alone does).

Tools (each name gets the prefix): `echo` answers `<text> (MCP <revision>)`, the revision the
call was served at; `slow` sleeps `seconds`; `crash` exits mid-call; `getenv` reads one variable
of the server's environment; `region` has a parameter marked `x-mcp-header` (over HTTP
the SDK checks the `Mcp-Param-Region` header against it). `--pid-file` writes the server's
pid once it serves.

`--http-port-file PATH` serves over Streamable HTTP instead, on 127.0.0.1 at a port of the
system's choice (written to PATH once it listens; the endpoint is `/mcp`): by default the SDK's
own app (both eras), with `--modern-only` every request goes to the SDK's own 2026-07-28 HTTP
entry (one POST per request; a handshake-era request is refused with HTTP 400, a GET with 405).
Env FAKE_MCP_SLOW_MARK=PATH: `slow` creates PATH when it starts sleeping.
Env FAKE_MCP_FRAMES=PATH: every line the client sends is appended to PATH as received (over
HTTP: every POST body, one line each, then a line `{"headers": {...}}` of its `mcp-*` headers).
Env FAKE_MCP_REQUIRE_HEADER="Name: value" (HTTP): a request without that header gets 401.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server import runner
from mcp.server._streamable_http_modern import handle_modern_request
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.stdio import stdio_server
from pydantic import Field

server = MCPServer("modern-echo")


def echo(text: str, ctx: Context) -> str:
    """Echo `text`, with the MCP revision this call was served at."""
    return f"{text} (MCP {ctx.protocol_version})"


async def slow(seconds: float) -> str:
    """Sleep `seconds`, then say so."""
    mark = os.environ.get("FAKE_MCP_SLOW_MARK")
    if mark:
        Path(mark).touch()
    await anyio.sleep(seconds)
    return f"slept {seconds:g} s"


def crash() -> str:
    """Exit the whole server in the middle of this call."""
    time.sleep(0.2)
    os._exit(3)


def region(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str
) -> str:
    """`text` in `region` (over HTTP the client mirrors `region` into `Mcp-Param-Region`)."""
    return f"{text} in {region}"


def getenv(name: str) -> str:
    """The value of one variable of this server's environment."""
    return os.environ.get(name, "")


def record_frames(path: str) -> None:
    """Put a pipe in front of stdin that appends every line the client sends to `path`."""
    read_end, write_end = os.pipe()
    source = os.fdopen(os.dup(0), "rb")
    os.dup2(read_end, 0)
    os.close(read_end)

    def relay() -> None:
        with open(path, "ab") as log, os.fdopen(write_end, "wb") as sink:
            for line in source:
                log.write(line)
                log.flush()
                sink.write(line)
                sink.flush()

    threading.Thread(target=relay, daemon=True).start()


async def serve_modern_only() -> None:
    """The 2026-07-28 loop alone (the SDK's own, which `Server.run` reaches only when the
    client's first request carries the envelope): `initialize` gets -32022."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await runner._serve_modern_stream(
            lowlevel, read, write, lifespan_state=state, raise_exceptions=False
        )


def http_app(modern_only: bool) -> object:
    """The ASGI app: the SDK's own, or (modern-only) its 2026-07-28 entry for every request;
    either behind the frame recorder and the header check."""
    frames, required = os.environ.get("FAKE_MCP_FRAMES"), os.environ.get("FAKE_MCP_REQUIRE_HEADER")
    lowlevel = server._lowlevel_server
    inner = None if modern_only else server.streamable_http_app()
    state: dict[str, object] = {}

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "lifespan" and inner is None:
            async with lowlevel.lifespan(lowlevel) as state["lifespan"]:
                await receive()  # startup
                await send({"type": "lifespan.startup.complete"})
                await receive()  # shutdown
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            await inner(scope, receive, send)  # type: ignore[misc]
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if required:
            name, _, value = required.partition(":")
            if headers.get(name.strip().lower()) != value.strip():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        if frames and scope["method"] == "POST":
            body, more = b"", True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            mcp_headers = {k: v for k, v in headers.items() if k.startswith("mcp-")}
            with open(frames, "a") as log:
                log.write(json.dumps(json.loads(body)) + "\n")
                log.write(json.dumps({"headers": mcp_headers}) + "\n")
            receive = replay(body, receive)
        if inner is not None:
            await inner(scope, receive, send)
            return
        await handle_modern_request(
            lowlevel, None, False, state.get("lifespan"), scope, receive, send
        )

    return app


def replay(body: bytes, receive):  # type: ignore[no-untyped-def]
    """An ASGI `receive` that gives `body` (already read) first, then the connection's own."""
    given = False

    async def receive_again():  # type: ignore[no-untyped-def]
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again


def serve_http(port_file: str, modern_only: bool) -> None:
    """Serve on 127.0.0.1 at a port of the system's choice, written to `port_file`."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(http_app(modern_only), log_level="warning", lifespan="on")
    sock.listen()
    Path(port_file + ".tmp").write_text(str(sock.getsockname()[1]))
    os.replace(port_file + ".tmp", port_file)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--modern-only", action="store_true")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--pid-file")
    parser.add_argument("--http-port-file")
    args = parser.parse_args()
    for tool in (echo, slow, crash, getenv, region):
        server.add_tool(tool, name=f"{args.prefix}{tool.__name__}")
    if os.environ.get("FAKE_MCP_FRAMES") and not args.http_port_file:
        record_frames(os.environ["FAKE_MCP_FRAMES"])
    if args.pid_file:
        Path(args.pid_file).write_text(str(os.getpid()))
    if args.http_port_file:
        serve_http(args.http_port_file, args.modern_only)
    elif args.modern_only:
        anyio.run(serve_modern_only)
    else:
        server.run("stdio")
