"""What `jmp` says about itself: `--version`, and the epilog of `--help` (the key variables,
and where this copy keeps sessions and reads its MCP config). Stdlib only."""

from __future__ import annotations

import argparse
import os
import sys


class Version(argparse.Action):
    """`--version`: jmp's version (kernel/config/install.py), looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print jmp's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from kernel.config.install import PROJECT, kind, version

        out = getattr(parser, "help_file", None) or sys.stdout
        out.write(f"jmp {version()} ({kind()}, {PROJECT})\n")
        parser.exit(0)


def epilog() -> str:
    """The key variables, and where this copy keeps sessions and reads its MCP config."""
    from kernel.config.install import default_mcp_config, default_sessions_dir, kind

    sessions = os.environ.get("JMP_SESSIONS_DIR") or default_sessions_dir()
    mcp = os.environ.get("JMP_MCP_CONFIG") or default_mcp_config()
    return "\n".join(
        [
            "environment:",
            "  TYPESAFE_API_KEY   Jev's key (the router); TYPESAFE_BASE_URL, JEV_MODEL",
            "  FLASH_API_KEY      Flash's key (the generator; or DEEPSEEK_API_KEY);",
            "                     FLASH_BASE_URL, FLASH_MODEL",
            "  (or store both keys once: jmp --setup, in ~/.config/jmp/keys.json)",
            f"  JMP_SESSIONS_DIR   where sessions live; now {sessions}",
            f'  JMP_MCP_CONFIG     MCP servers ({{"mcpServers": {{...}}}}); now {mcp}',
            "  JMP_WARM=0         no warm worker pool (every worker starts cold)",
            "  and JEV_CONTEXT_BYTES, FLASH_CONTEXT_BYTES, JEV_ROUTE_FLOOR, JEV_ARGUMENT_OFFLOAD,",
            "  JMP_BASH_TIMEOUT_S, JMP_BASH_OUTPUT_BYTES (docs/JMP.md, Environment)",
            "",
            *_where(kind()),
        ]
    )


def _where(kind: str) -> list[str]:
    if kind == "checkout":
        return ["This copy is a source checkout: its sessions and MCP config are in its .jmp/."]
    return [
        "This copy is installed: sessions under $XDG_DATA_HOME/jmp (~/.local/share/jmp), the",
        "MCP config in $XDG_CONFIG_HOME/jmp (~/.config/jmp); an uninstall leaves both.",
    ]
