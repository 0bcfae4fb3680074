"""The tool worker's MCP tools: `toolset` (OpenHands `create_mcp_tools`, one client per
configured server; calls, validation, limits), `launch` (how a server starts and is killed),
`results` (what an answer or a failure reads as)."""
