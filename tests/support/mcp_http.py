"""A loopback HTTP MCP server for the tests: jmp_lab/servers/mcp_modern_server.py (or another
server taking `--http-port-file`) on 127.0.0.1, at a port of the system's choice."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def serve_http(
    port_file: Path, command: list[str], env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `command --http-port-file PORT_FILE`; its process and its /mcp URL once it wrote
    the port (AssertionError naming the command when it did not within 60 s)."""
    process = subprocess.Popen([*command, "--http-port-file", str(port_file)], env=env)
    deadline = time.monotonic() + 60
    while not port_file.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if not port_file.exists():
        process.kill()
        process.wait()
        raise AssertionError(f"the HTTP MCP server {command} did not start")
    return process, f"http://127.0.0.1:{port_file.read_text()}/mcp"
