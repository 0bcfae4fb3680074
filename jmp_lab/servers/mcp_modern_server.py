"""A stdio MCP server of the stateless revision, 2026-07-28, written with the mcp 2.x SDK.

    .venv/mcp-2026-07-28/bin/python jmp_lab/servers/mcp_modern_server.py [--modern-only]
                                    [--prefix P] [--pid-file PATH]

Run by the Python of `make install`'s `.venv/mcp-2026-07-28` (the mcp 2.x SDK cannot be
imported beside jmp's mcp 1.x); `jmp_lab/servers/mcp_server.py` is its 1.x (initialize-only)
counterpart. By default the SDK's `MCPServer` serves both eras on one stdio connection, as the
client's first request decides (`server/discover` with the 2026-07-28 envelope, or
`initialize`). `--modern-only` serves 2026-07-28 and nothing else: every frame goes to the
SDK's own 2026-07-28 serving loop, which answers `initialize` -32022 naming the versions it
serves (what a server of that revision alone does).

Tools (each name gets the prefix): `echo` answers `<text> (MCP <revision>)`, the revision the
call was served at; `slow` sleeps `seconds`; `crash` exits mid-call; `getenv` reads one variable
of the server's environment. `--pid-file` writes the server's pid once it serves.
Env FAKE_MCP_SLOW_MARK=PATH: `slow` creates PATH when it starts sleeping.
Env FAKE_MCP_FRAMES=PATH: every line the client sends is appended to PATH as received.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import anyio
from mcp.server import runner
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.stdio import stdio_server

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


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--modern-only", action="store_true")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--pid-file")
    args = parser.parse_args()
    for tool in (echo, slow, crash, getenv):
        server.add_tool(tool, name=f"{args.prefix}{tool.__name__}")
    if os.environ.get("FAKE_MCP_FRAMES"):
        record_frames(os.environ["FAKE_MCP_FRAMES"])
    if args.pid_file:
        Path(args.pid_file).write_text(str(os.getpid()))
    if args.modern_only:
        anyio.run(serve_modern_only)
    else:
        server.run("stdio")
