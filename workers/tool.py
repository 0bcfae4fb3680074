"""The tool worker: OpenHands FileEditorExecutor and TerminalExecutor (and MCP tools), confined.

`python -m workers.tool ENDPOINT --workspace DIR --terminal-dir DIR`. OpenHands is imported in
`setup` (slow), so the kernel keeps working while this worker warms up. Every path is resolved
inside the workspace; anything else is `invalid_arguments` before any effect.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
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
from workers.base import RequestFailed, main_for
from workers.shell import BashRunner, Outcome, clamp_timeout

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, bracketed-paste toggles
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|[\x00-\x08\x0b-\x1f\x7f]"  # remaining control characters except \t and \n
)

# The executor binding of each catalog tool (protocol/catalog.py holds names and descriptions):
# tool -> (native command fixed by the tool, argument names offered, required names)
SLICES: dict[str, tuple[str | None, tuple[str, ...], tuple[str, ...]]] = {
    "read": ("view", ("path", "view_range"), ("path",)),
    "write": ("create", ("path", "file_text"), ("path", "file_text")),
    "edit": (None, ("command", "path", "old_str", "new_str", "insert_line"), ("command", "path")),
    "bash": (None, ("command", "is_input", "timeout"), ("command",)),
}
PATH_DESCRIPTION = "Path of the file or directory: absolute, or relative to the workspace."


def strip_ansi(text: str) -> str:
    """Terminal output as plain text: escape sequences and control characters removed."""
    return _ANSI.sub("", text.replace("\r\n", "\n"))


def confine(workspace: Path, raw: Any, protected: tuple[Path, ...] = ()) -> str:
    """The absolute, resolved form of `raw`; raises invalid_arguments outside the workspace
    or inside a protected directory (jmp's own sessions: its log, lock and artifacts)."""
    if not isinstance(raw, str) or not raw.strip():
        raise RequestFailed("invalid_arguments", "path must be a non-empty string")
    path = Path(raw) if os.path.isabs(raw) else workspace / raw
    resolved = path.resolve()
    if resolved != workspace and workspace not in resolved.parents:
        raise RequestFailed(
            "invalid_arguments", f"path {raw!r} is outside the workspace {workspace}"
        )
    for home in protected:
        if resolved == home or home in resolved.parents:
            raise RequestFailed(
                "invalid_arguments",
                f"path {raw!r} is inside jmp's sessions directory {home}: the file tools never "
                "read or change jmp's own log, lock or artifacts",
            )
    return str(resolved)


def protected_dirs(workspace: Path, given: list[str]) -> tuple[Path, ...]:
    """The sessions directories to keep the file tools out of (resolved, links included);
    one that holds the workspace itself cannot be kept out and is left alone."""
    dirs = (Path(p).resolve() for p in given)
    return tuple(d for d in dirs if d != workspace and d not in workspace.parents)


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
        args = parser.parse_args(argv)
        # Read before any shell exists; the secrets never enter our environment.
        self.mcp_config = read_stdin_config() if args.mcp_config_stdin else ""
        self.bash = BashRunner(args.terminal_dir, args.bash_timeout_s, args.bash_output_bytes)
        self.workspace = Path(args.workspace).resolve()
        self.protected = protected_dirs(self.workspace, args.protect)
        self.terminal_dir = args.terminal_dir
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
        from workers.editor import workspace_executor

        self.editor = workspace_executor(self.workspace)
        self.terminal = self._new_terminal()
        self.specs = [self._spec(tool.name) for tool in catalog.WORKER_TOOLS]
        self._start_mcp()

    def _new_terminal(self) -> Any:
        from openhands.tools.terminal.impl import TerminalExecutor

        if self.terminal_dir:
            Path(self.terminal_dir).mkdir(parents=True, exist_ok=True)
        return TerminalExecutor(
            working_dir=str(self.workspace),
            terminal_type="subprocess",  # never tmux: its server would outlive our tree
            full_output_save_dir=self.terminal_dir,
        )

    def _spec(self, name: str) -> ToolSpec:
        """A slice of the native action's JSON schema: only the offered fields."""
        _fixed, fields, required = SLICES[name]
        full = self.models[name].model_json_schema()
        props = {field: dict(full["properties"][field]) for field in fields}
        if "path" in props:
            props["path"]["description"] = PATH_DESCRIPTION
        if name == "bash":
            props["timeout"]["description"] = (
                f"Optional. Seconds the command may run, at most {self.bash.timeout_s:g} (also "
                "the default). Past it the command is stopped and reported unfinished."
            )
        if name == "edit":
            props["command"]["enum"] = ["str_replace", "insert"]
            props["command"]["description"] = "`str_replace` or `insert`."
        schema = {
            "type": "object",
            "properties": props,
            "required": list(required),
            "additionalProperties": False,
        }
        return ToolSpec(
            name=name, description=catalog.BUILTINS[name].description, parameters=schema
        )

    def _start_mcp(self) -> None:
        config, self.mcp_config = self.mcp_config.strip(), ""
        if not config:
            return
        try:
            from workers import mcp  # written separately; absent means no MCP tools
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
                return self.run(msg, cancel)
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
        if tool not in SLICES:
            raise RequestFailed("unknown_tool", f"no tool named {tool!r}")
        fixed, fields, required = SLICES[tool]
        extra = sorted(set(arguments) - set(fields))
        missing = [name for name in required if arguments.get(name) is None]
        if extra or missing:
            what = [f"unexpected argument {n!r}" for n in extra]
            what += [f"missing required argument {n!r}" for n in missing]
            raise RequestFailed("invalid_arguments", f"{tool}: " + "; ".join(what))
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
        _check_edit(tool, action)
        return action

    def run(self, msg: RunTool, cancel: threading.Event) -> ToolResult:
        """Run one call in this thread; a cancel interrupts a shell command."""
        start = time.monotonic()
        if msg.tool.startswith("mcp.") and self.mcp is not None:
            self.validate(msg.tool, msg.arguments)  # never trust the wire
            fields = self.mcp.call(msg.tool, msg.arguments, cancel, timeout_s=msg.timeout_s)
            # The real time, a timed-out or cancelled call included.
            return ToolResult(reply_to=msg.id, seconds=time.monotonic() - start, **fields)
        action = self._action(msg.tool, msg.arguments)
        if msg.tool != "bash":
            obs = self.editor(action)
            return ToolResult(
                reply_to=msg.id,
                status="error" if obs.is_error else "ok",
                text=strip_ansi(obs.text),
                error=strip_ansi(obs.text) if obs.is_error else "",
                seconds=time.monotonic() - start,
            )
        if action.timeout is None and msg.timeout_s is not None:
            action = action.model_copy(update={"timeout": msg.timeout_s})
        shell = self.terminal.session.terminal
        if shell.process is None or shell.process.poll() is not None:
            # The shell exited (`exit`, or stopped at a limit); OpenHands would reset to tmux.
            with contextlib.suppress(Exception):
                self.terminal.close()
            self.terminal = self._new_terminal()
        outcome = self.bash.run(self.terminal, action, cancel)
        return _bash_result(msg.id, outcome, self.bash, time.monotonic() - start)


def _check_edit(tool: str, action: Any) -> None:
    """Arguments the native editor calls required for a command, checked before any effect."""
    if tool != "edit":
        return
    if action.command not in ("str_replace", "insert"):
        raise RequestFailed("invalid_arguments", "edit: command must be str_replace or insert")
    if action.command == "str_replace" and action.old_str is None:
        raise RequestFailed("invalid_arguments", "edit: str_replace needs old_str")
    if action.command == "insert" and (action.insert_line is None or action.new_str is None):
        raise RequestFailed("invalid_arguments", "edit: insert needs insert_line and new_str")


def _bash_result(ident: str, outcome: Outcome, bash: BashRunner, seconds: float) -> ToolResult:
    """ToolResult of a shell command: the real exit code when it finished; when it was stopped
    (a limit, or Ctrl+C/cancel) `exit_code -1` whatever the shell said after C-c (130, 137, none)
    and the fact itself: `interrupted: true` with the reason."""
    obs = outcome.observation
    meta = obs.metadata
    body = obs.text if outcome.output is None else outcome.output
    suffix = meta.suffix
    code = -1 if outcome.reason else obs.exit_code  # stopped: unfinished, never success
    error = ""
    if outcome.reason in ("timeout", "output_cap"):
        limit = (
            f"its time limit ({bash.timeout_s:g} s max, JMP_BASH_TIMEOUT_S)"
            if outcome.reason == "timeout"
            else f"the output cap ({bash.output_bytes} bytes, JMP_BASH_OUTPUT_BYTES)"
        )
        error = f"stopped at {limit}; the command did not finish"
        suffix = f"\n[{error}.]"
    elif outcome.reason == "cancelled":
        error = "interrupted by cancel"
    prefix = meta.prefix if outcome.output is None else ""  # kept output is whole: no "[...]"
    text = strip_ansi(f"{prefix}{body}{suffix}").strip("\n")
    if not error and obs.is_error:
        error = text
    elif not error and code is not None and code > 0:
        error = f"exit code {code}"
    return ToolResult(
        reply_to=ident,
        status="error" if error else "ok",
        exit_code=code,
        text=text,
        error=error,
        seconds=seconds,
        interrupted=bool(outcome.reason),
        reason=outcome.reason,
    )


if __name__ == "__main__":
    main_for("tool", ToolWorker)
