"""The built-in tool catalog: each tool's name, its one description and its effect class.

Pure data, read by both sides: the router's options (kernel/loop/prompts.py), the tool worker's
schemas (workers/tool/binding.py, which binds each name to an OpenHands executor), context-cache
invalidation (kernel/context/state.py), the pending-call check (kernel/store/pending.py) and the
loop's `recall` branch (kernel/loop/steps.py). Adding a built-in tool touches this file and the
worker's executor binding, nothing else. A tool not listed here (an MCP tool, `mcp.<name>`) may
do anything.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# observes: no effect on anything. writes_target: changes its own target (a file) and nothing
# else. any: may change anything (a shell command, an MCP tool).
Effect = Literal["observes", "writes_target", "any"]


class BuiltinTool(msgspec.Struct, frozen=True, kw_only=True):
    """One built-in tool as both the router and the argument generator are told about it."""

    name: str
    description: str
    effect: Effect
    snapshot: bool = False  # a successful call's output is a snapshot of its target (a file view)
    shell: bool = False  # runs in the persistent shell: may return still running (exit_code -1)
    worker: bool = True  # executed by the tool worker (False: by the kernel itself)


READ = BuiltinTool(
    name="read",
    description="Show a text file with line numbers (optionally only view_range [first, last], "
    "1-based, last -1 = end of file), or list a directory up to two levels deep (symbolic links "
    "end in @ and are not followed). No effect on anything.",
    effect="observes",
    snapshot=True,
)
WRITE = BuiltinTool(
    name="write",
    description="Create a new file with the given full content. Refused if the file already "
    "exists: change an existing file with edit.",
    effect="writes_target",
)
EDIT = BuiltinTool(
    name="edit",
    description="Change an existing file: `str_replace` replaces old_str, which must match "
    "exactly once, with new_str; `insert` inserts new_str after line insert_line (0 = at the "
    "top).",
    effect="writes_target",
)
BASH = BuiltinTool(
    name="bash",
    description="Run one shell command (tests, builds, git, search, scripts) in a persistent "
    "bash session whose working directory starts at the workspace. Each call ends when its "
    "command ends; a command that runs past its time limit or prints more than the output cap "
    "is stopped and reported unfinished (exit_code -1, interrupted), so start long-lived "
    "servers in the background (`cmd > log 2>&1 &`).",
    effect="any",
    shell=True,
)
RECALL = BuiltinTool(
    name="recall",
    description="Search or page this session's own history (requests, answers, tool records and "
    "full outputs). Read-only. Give `query` (words) to search, or `seq` to read one record's "
    "pages. Results are records of the past, not the current state of files.",
    effect="observes",
    worker=False,
)

WORKER_TOOLS: tuple[BuiltinTool, ...] = (READ, WRITE, EDIT, BASH)  # the router's order
BUILTINS: dict[str, BuiltinTool] = {t.name: t for t in (*WORKER_TOOLS, RECALL)}


def effect_of(tool: str) -> Effect:
    """A tool's effect class; anything not built in (MCP tools) may do anything."""
    known = BUILTINS.get(tool)
    return known.effect if known else "any"


def is_snapshot(tool: str) -> bool:
    """True when a successful call of `tool` is a view of its target's content at that time."""
    known = BUILTINS.get(tool)
    return bool(known and known.snapshot)


def is_shell(tool: str) -> bool:
    """True when `tool` runs in the persistent shell (its last command may still be running)."""
    known = BUILTINS.get(tool)
    return bool(known and known.shell)


def is_file_tool(tool: str) -> bool:
    """True for the tool worker's file tools (read, write, edit): each call ends within the
    kernel's file-tool limit (kernel/supervision/restart.py FILE_TOOL_S)."""
    known = BUILTINS.get(tool)
    return bool(known and known.worker and not known.shell)


def is_kernel_tool(tool: str) -> bool:
    """True when the kernel runs `tool` itself (recall) rather than the tool worker."""
    known = BUILTINS.get(tool)
    return bool(known and not known.worker)
