"""The tool worker's MCP tools: `toolset` (OpenHands `create_mcp_tools`, one client per
configured server; calls, validation, limits), `modern` (jmp's own client of MCP 2026-07-28, for
a stdio or Streamable HTTP server that refuses `initialize`), `launch` (how a server starts and
is killed), `results` (what an answer or a failure reads as)."""
