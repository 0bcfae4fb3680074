"""The jev-harness MCP server: `python -m jev_harness.mcp SCRIPT --goal TEXT --inputs JSON`.

A stdio MCP server (the `mcp` SDK, low-level server) serving one harness session with the tools
`observe`, `arguments`, `operate` and `run_task` (docs/HARNESS.md section 7); `cli` owns the process
(arguments, stdout discipline, archive, signals, shutdown), `server` the calls and their
results, `tools` the closed schemas and the argument checks.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the server (see `jev_harness.mcp.cli`); returns the exit status."""
    from jev_harness.mcp.cli import main as run

    return run(argv)


def entry() -> None:
    """`python -m jev_harness.mcp` and `python -m apixly_jev_harness.mcp`: the server, or, in a
    Python that lacks jmp's dependencies (its first import is msgspec's), what to install or
    which Python to use, as `python main.py` says it, and exit 2; never a traceback."""
    import sys

    try:
        from jev_harness.mcp.cli import entry as run

        run()  # exits; its own start (the redactor's import) is inside this guard too
    except ImportError as exc:
        from kernel.config.install import missing_dependency

        advice = missing_dependency(exc, command="jev-harness-mcp")
        if advice is None:
            raise
        print(f"jev-harness-mcp: {advice}", file=sys.stderr)
        sys.exit(2)
