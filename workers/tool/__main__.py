"""The tool worker: OpenHands FileEditorExecutor and TerminalExecutor (and MCP tools), confined.

`python -m workers.tool ENDPOINT --workspace DIR --terminal-dir DIR`. OpenHands is imported in
`setup` (slow), so the kernel keeps working while this worker warms up. Every path is resolved
inside the workspace; anything else is `invalid_arguments` before any effect.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from protocol import catalog
from protocol.messages import (
    ListTools,
    RunTool,
    ToolList,
    ToolResult,
    ToolSpec,
    Validate,
    Validated,
)
from workers.base import RequestFailed, main_for, on_exit
from workers.tool.binding import SLICES, check_edit, check_names, confine, protected_dirs, tool_spec
from workers.tool.files import refusal
from workers.tool.output import bash_result, editor_result, previous_text
from workers.tool.shell import BashRunner, clamp_timeout
from workers.tool.terminal import rc_free_bash, start_terminal


def read_stdin_config() -> str:
    """The MCP config the kernel wrote on our stdin; fd 0 becomes /dev/null afterwards, so
    no shell inherits the pipe."""
    data = sys.stdin.buffer.read()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return data.decode("utf-8")


class ToolWorker:
    """Handler of the tool worker: ListTools, Validate and RunTool."""

    def __init__(self, argv: list[str]) -> None:
        parser = argparse.ArgumentParser(prog="python -m workers.tool ENDPOINT")
        parser.add_argument("--workspace", default=os.getcwd())
        parser.add_argument("--terminal-dir", default=None)
        parser.add_argument("--protect", action="append", default=[], metavar="DIR")
        parser.add_argument("--mcp-config-stdin", action="store_true")
        parser.add_argument("--bash-timeout-s", type=float, default=300.0)
        parser.add_argument("--bash-output-bytes", type=int, default=5_000_000)
        parser.add_argument("--editor-history", default=None, metavar="DIR")
        args = parser.parse_args(argv)
        # Read before any shell exists; the secrets never enter our environment.
        self.mcp_config = read_stdin_config() if args.mcp_config_stdin else ""
        self.bash = BashRunner(args.terminal_dir, args.bash_timeout_s, args.bash_output_bytes)
        self.workspace = Path(args.workspace).resolve()
        self.protected = protected_dirs(self.workspace, args.protect)
        self.terminal_dir = args.terminal_dir
        self.editor_history = args.editor_history
        self.shell_path: str | None = None
        self.models: dict[str, Any] = {}
        self.specs: list[ToolSpec] = []
        self.mcp: Any = None
        self.mcp_failed: dict[str, str] = {}

    # --- setup ----------------------------------------------------------------

    def setup(self) -> None:
        """Import OpenHands, start the editor, the subprocess terminal and MCP servers."""
        quiet = "LOG_LEVEL" not in os.environ
        if quiet:  # OpenHands logs INFO lines to stderr at import; keep the user's stderr clean
            os.environ["LOG_LEVEL"] = "WARNING"
        from openhands.tools.file_editor.definition import FileEditorAction
        from openhands.tools.terminal.definition import TerminalAction

        if quiet:
            os.environ.pop("LOG_LEVEL", None)
        self.models = {"read": FileEditorAction, "write": FileEditorAction}
        self.models |= {"edit": FileEditorAction, "bash": TerminalAction}
        from workers.tool.editor import workspace_executor

        history = Path(self.editor_history) if self.editor_history else None
        self.editor = workspace_executor(self.workspace, history)
        self.terminal = self._new_terminal()
        self.specs = [
            tool_spec(t.name, self.models[t.name], self.bash.timeout_s)
            for t in catalog.WORKER_TOOLS
        ]
        self._start_mcp()

    def _new_terminal(self) -> Any:
        if self.terminal_dir:
            Path(self.terminal_dir).mkdir(parents=True, exist_ok=True)
        if self.shell_path is None:
            folder = self.terminal_dir
            if not folder:  # standalone use: a dir of our own, gone when we exit
                folder = tempfile.mkdtemp(prefix="jmp-sh-")
                on_exit(functools.partial(shutil.rmtree, folder, ignore_errors=True))
            self.shell_path = rc_free_bash(Path(folder))
        return start_terminal(str(self.workspace), self.shell_path, self.terminal_dir)

    def _start_mcp(self) -> None:
        config, self.mcp_config = self.mcp_config.strip(), ""
        if not config:
            return
        try:
            from workers.mcp import toolset as mcp  # written separately; absent means no MCP tools
        except ImportError as exc:
            print(f"tool worker: MCP unavailable ({exc})", file=sys.stderr)
            return
        self.mcp = mcp.start_toolset(json.loads(config))
        self.mcp_failed = dict(self.mcp.failed)

    # --- requests -------------------------------------------------------------

    def __call__(self, msg: Any, send: Any, cancel: threading.Event) -> Any:
        match msg:
            case ListTools():
                mcp_specs = list(self.mcp.specs) if self.mcp else []
                return ToolList(
                    reply_to=msg.id, tools=self.specs + mcp_specs, failed_servers=self.mcp_failed
                )
            case Validate():
                arguments, target = self.validate(msg.tool, msg.arguments)
                return Validated(reply_to=msg.id, arguments=arguments, target=target)
            case RunTool():
                return self.run(msg, cancel, send)
        raise RequestFailed("bad_request", f"the tool worker does not serve {type(msg).__name__}")

    def validate(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Normalized arguments and target, or RequestFailed(invalid_arguments / unknown_tool)."""
        if tool.startswith("mcp.") and self.mcp is not None:
            try:
                args, target = self.mcp.validate(tool, arguments)
            except LookupError as exc:
                raise RequestFailed("unknown_tool", str(exc)) from exc
            except ValueError as exc:
                raise RequestFailed("invalid_arguments", str(exc)) from exc
            return dict(args), str(target)
        action = self._action(tool, arguments)
        fields = SLICES[tool][1]
        normal = {k: v for k, v in action.model_dump().items() if k in fields}
        normal = {k: v for k, v in normal.items() if v is not None or k in arguments}
        return normal, action.command if tool == "bash" else action.path

    def _action(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The native pydantic action (validated, extra fields forbidden)."""
        check_names(tool, arguments)
        fixed, fields, _required = SLICES[tool]
        data = dict(arguments)
        if "path" in fields:
            data["path"] = confine(self.workspace, arguments["path"], self.protected)
        if fixed is not None:
            data["command"] = fixed
        if tool == "bash" and isinstance(data.get("timeout"), int | float):
            # 1e308, inf, NaN, negative: clamped to the configured limit, never taken as given
            data["timeout"] = clamp_timeout(data["timeout"], self.bash.timeout_s)
        try:
            action = self.models[tool].model_validate(data)
        except ValueError as exc:  # pydantic.ValidationError is a ValueError
            raise RequestFailed("invalid_arguments", f"{tool}: {exc}") from exc
        check_edit(tool, action)
        return action

    def run(self, msg: RunTool, cancel: threading.Event, send: Any = None) -> ToolResult:
        """Run one call in this thread; a cancel interrupts a shell command. `send`: where a
        shell command's ToolProgress goes while it runs."""
        start = time.monotonic()
        if msg.tool.startswith("mcp.") and self.mcp is not None:
            self.validate(msg.tool, msg.arguments)  # never trust the wire
            from workers.mcp.toolset import EffectUnknown  # loaded: self.mcp is its toolset

            try:
                fields = self.mcp.call(msg.tool, msg.arguments, cancel, timeout_s=msg.timeout_s)
            except EffectUnknown as exc:  # the kernel records the call tool_uncertain
                raise RequestFailed("effect_unknown", str(exc)) from exc
            # The real time, a timed-out or cancelled call included.
            return ToolResult(reply_to=msg.id, seconds=time.monotonic() - start, **fields)
        action = self._action(msg.tool, msg.arguments)
        if msg.tool != "bash":
            refused = refusal(msg.tool, action.path, self.workspace)
            if refused is not None:  # a FIFO, a device, a socket, a link swapped in
                seconds = time.monotonic() - start
                return ToolResult(
                    reply_to=msg.id, status="error", text=refused, error=refused, seconds=seconds
                )
            before = previous_text(action.path) if msg.tool == "write" else None
            observation = self.editor(action)
            seconds = time.monotonic() - start
            return editor_result(msg.id, observation, seconds, self.workspace, before)
        if action.timeout is None and msg.timeout_s is not None:
            action = action.model_copy(update={"timeout": msg.timeout_s})
        shell = self.terminal.session.terminal
        if shell.process is None or shell.process.poll() is not None:
            # The shell exited (`exit`, or stopped at a limit); OpenHands would reset to tmux.
            with contextlib.suppress(Exception):
                self.terminal.close()
            self.terminal = self._new_terminal()
        outcome = self.bash.run(self.terminal, action, cancel, send, msg.id)
        return bash_result(msg.id, outcome, self.bash, time.monotonic() - start)


if __name__ == "__main__":
    main_for("tool", ToolWorker)
