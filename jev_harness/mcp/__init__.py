"""The jev-harness MCP server: `python -m jev_harness.mcp SCRIPT --goal TEXT --inputs JSON`.

A stdio MCP server (the `mcp` SDK, low-level server) serving one harness session with the tools
`observe`, `arguments`, `operate` and `run_task` (HARNESS.md section 7); `cli` owns the process
(arguments, stdout discipline, archive, signals, shutdown), `server` the calls and their
results, `tools` the closed schemas and the argument checks.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the server (see `jev_harness.mcp.cli`); returns the exit status."""
    from jev_harness.mcp.cli import main as run

    return run(argv)
