"""A client nobody here wrote, driven from the suite: the mcp 2.x SDK's `Client` (MCP 2026-07-28).

Run by the Python of `make install`'s `.venv/mcp-2026-07-28` (the mcp 2.x SDK cannot be
imported beside jmp's mcp 1.x), never by the suite's own: `python mcp_modern_client.py SPEC`,
SPEC a JSON object {command, args, env, cwd, mode}. It connects in `mode` ("auto": the
`server/discover` probe, falling back to `initialize` only for a legacy server; "legacy": the
handshake), lists the tools, calls `observe` and `arguments`, and prints one JSON object: the
revision agreed, the server's identity, the tools as listed and the two results."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    params = StdioServerParameters(
        command=spec["command"], args=spec["args"], env=spec["env"], cwd=spec["cwd"]
    )
    async with Client(params, mode=spec["mode"]) as client:
        listed = await client.list_tools()
        observed = await client.call_tool("observe", {})
        view = observed.structured_content or {}
        tool = view["tools"][0]["name"]
        options = await client.call_tool(
            "arguments", {"tool": tool, "parents": {}, "state_ref": view["state_ref"]}
        )
        info = client.server_info
        return {
            "protocol_version": client.protocol_version,
            "server": info.model_dump(mode="json") if info is not None else None,
            "tools": [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
            ],
            "observe": observed.model_dump(mode="json", by_alias=True, exclude_none=True),
            "arguments": options.model_dump(mode="json", by_alias=True, exclude_none=True),
        }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, json.loads(sys.argv[1]))))
