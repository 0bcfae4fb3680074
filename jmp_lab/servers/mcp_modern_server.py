"""A stdio MCP server of the stateless revision, 2026-07-28, written with the mcp 2.x SDK.

    .venv/mcp-2026-07-28/bin/python jmp_lab/servers/mcp_modern_server.py

Run by the Python of `make install`'s `.venv/mcp-2026-07-28` (the mcp 2.x SDK cannot be
imported beside jmp's mcp 1.x); `jmp_lab/servers/mcp_server.py` is its 1.x (initialize-only)
counterpart. The SDK's `MCPServer` serves both eras on one stdio connection, as the client's
first request decides (`server/discover` with the 2026-07-28 envelope, or `initialize`). Its one
tool, `echo`, answers `<text> (MCP <revision>)`: the revision the call was served at.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("modern-echo")


@server.tool()
def echo(text: str, ctx: Context) -> str:
    """Echo `text`, with the MCP revision this call was served at."""
    return f"{text} (MCP {ctx.protocol_version})"


if __name__ == "__main__":
    server.run("stdio")
