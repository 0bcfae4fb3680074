"""Loopback stand-ins for the hosted models and sources: JevServer (jev.py), FlashServer
(flash.py), SiteServer (site.py), a script-made site (rendered.py), a Camofox REST fake
(camofox.py), and a real stdio MCP server
whose tools misbehave on request (mcp_server.py, run as a script: MCP_SERVER is its path)."""

from pathlib import Path

MCP_SERVER = str(Path(__file__).resolve().with_name("mcp_server.py"))
