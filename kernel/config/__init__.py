"""Settings from the environment and the MCP server config."""
