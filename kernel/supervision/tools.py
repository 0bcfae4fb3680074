"""The kernel's handle on the tool worker: specs, validation and calls, over the supervisor.

The worker is spawned by `start()` without waiting, so OpenHands imports while models run.
Replacement follows restart.py: a worker that died idle is replaced before the next request;
`ListTools` and `Validate` (no effect) lost to a death go once more to a fresh worker; a death
during `RunTool` surfaces as `WorkerDied` (its whole tree already gone) and is never re-sent.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kernel.config.settings import MODEL_KEYS, bash_limits, file_tool_s, tool_ready_s
from kernel.store.redact import Redactor, environment_secrets
from kernel.supervision.restart import TOOL_BACKSTOP_S, WorkerSlot
from kernel.supervision.supervisor import Worker, make_runtime_dir
from protocol.catalog import is_file_tool
from protocol.messages import (
    ListTools,
    RunTool,
    ToolList,
    ToolProgress,
    ToolResult,
    ToolSpec,
    Validate,
    Validated,
)


class Servers(Protocol):
    def to_json(self) -> str: ...


class Tools:
    """Tool worker owner. Not thread-safe: one caller at a time, like the agent loop."""

    def __init__(
        self,
        workspace: Path | str,
        terminal_dir: Path | str,
        servers: Servers | None = None,
        sessions_dir: Path | str | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.terminal_dir = Path(terminal_dir)
        # SESSIONS/ID/terminal: the file tools stay out of SESSIONS (issue 9, item 7). The
        # shell cannot be kept out (see docs/JMP.md: bash is an unconfined shell).
        self.sessions_dir = Path(sessions_dir or self.terminal_dir.parent.parent)
        self.servers = servers
        self.failed_servers: dict[str, str] = {}
        self._runtime_dir: Path | None = None
        self._specs: list[ToolSpec] | None = None
        # JMP_TOOL_READY_S, else TOOL_READY_S: a cold OpenHands import on a loaded machine
        ready_s = tool_ready_s()
        # JMP_FILE_TOOL_TIMEOUT_S, else FILE_TOOL_S: a read of a FIFO swapped in after the
        # worker's check, or of a hung filesystem, ends (issue 32)
        self.file_tool_s = file_tool_s()
        self._slot = WorkerSlot("tool", self._new, ready_s, on_replace=self._forget_specs)
        # What the worker and its MCP servers print passes this; the Agent hands over the
        # session's redactor (every key and MCP secret). Alone, Tools knows the environment's.
        self.redactor: Redactor | None = None
        # A running call's output so far (ToolProgress, unredacted: its receiver redacts it),
        # for a front end's live view; None: not asked for.
        self.on_output: Callable[[ToolProgress], None] | None = None

    def start(self) -> None:
        """Spawn the tool worker now and return at once; idempotent while it lives, and a
        worker that died (idle, or its call already recorded as uncertain) is replaced."""
        self._slot.start()

    def _new(self) -> Worker:
        """A fresh tool worker, not started; MCP secrets reach it on stdin, never its env."""
        if self._runtime_dir is None:
            self._runtime_dir = make_runtime_dir()
        config = self._config()
        argv = self._argv() + (["--mcp-config-stdin"] if config else [])
        return Worker(
            "tool",
            self._runtime_dir,
            env=dict.fromkeys(MODEL_KEYS),
            argv=argv,
            redact=self._redact,
            stdin_data=config,
        )

    def _forget_specs(self) -> None:
        """A fresh worker lists its tools anew (its MCP servers may come up differently)."""
        self._specs = None

    def _redact(self, text: str) -> str:
        """Every known secret (keys, MCP secrets, token formats) out of what the worker and its
        servers print: an MCP server that logs its arguments must not leak a model key."""
        if self.redactor is None:
            secrets = (*environment_secrets(), *getattr(self.servers, "secrets", ()))
            self.redactor = Redactor(secrets)
        return self.redactor.text(text)

    def _argv(self) -> list[str]:
        assert self._runtime_dir is not None  # made by _new first
        limits = bash_limits()  # JMP_BASH_TIMEOUT_S, JMP_BASH_OUTPUT_BYTES (checked at start-up)
        return [
            *("--workspace", str(self.workspace), "--terminal-dir", str(self.terminal_dir)),
            *("--protect", str(self.sessions_dir), "--protect", str(self.terminal_dir.parent)),
            *("--bash-timeout-s", repr(limits["bash_timeout_s"])),
            *("--bash-output-bytes", str(limits["bash_output_bytes"])),
            # The editor's undo copies of workspace files: private, gone with the runtime dir
            # (a key in a workspace file must not reach the session directory).
            *("--editor-history", str(self._runtime_dir / "editor-history")),
        ]

    def _config(self) -> bytes | None:
        """The MCP config (secrets included) for the worker's stdin, or None without servers.

        Never the environment: the worker's shells inherit that (issue 9, item 4). The
        supervisor already keeps every key variable out of this worker's environment.
        """
        text = self.servers.to_json() if self.servers is not None else ""
        if text and json.loads(text).get("mcpServers"):
            return text.encode()
        return None

    @property
    def worker(self) -> Worker:
        """The live worker (started on first use, replaced if it has exited)."""
        return self._slot.start()

    def specs(self) -> list[ToolSpec]:
        """Built-in and MCP tool specs (cached per worker); waits for the worker to be ready."""
        if self._specs is None:
            reply: ToolList = self._slot.request(ListTools(id=_new_id()), resend=True)
            self.failed_servers = dict(reply.failed_servers)
            self._specs = list(reply.tools)
        return self._specs

    def validate(self, tool: str, args: dict[str, Any]) -> Validated:
        """Native-schema check with no effect; raises WorkerFailed(invalid_arguments, ...)."""
        msg = Validate(id=_new_id(), tool=tool, arguments=args)
        reply: Validated = self._slot.request(msg, resend=True)
        return reply

    def run(
        self,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Execute one call; a cancel interrupts it (ToolResult.interrupted) or kills the worker.
        A worker that died before the call is replaced first; one that dies during it raises
        WorkerDied and the call is never sent again (its effect is unknown)."""
        msg = RunTool(id=call_id, tool=tool, arguments=args, timeout_s=timeout_s)
        # The shell honours timeout_s itself (exit_code -1); the supervisor's limit is a backstop.
        backstop = None if timeout_s is None else timeout_s + TOOL_BACKSTOP_S
        if is_file_tool(tool):  # no limit of its own: the kernel's is the one (FILE_TOOL_S)
            backstop = min(backstop or self.file_tool_s, self.file_tool_s)
        reply: ToolResult = self._slot.request(
            msg, resend=False, cancel=cancel, timeout_s=backstop, on_progress=self.on_output
        )
        return reply

    def stop_soon(self) -> None:
        """Ask the worker to exit, without waiting; `close` waits."""
        self._slot.stop_soon()

    def close(self) -> None:
        """Stop the worker and its whole tree; remove the runtime dir. Idempotent."""
        self._slot.close()
        if self._runtime_dir is not None:
            import shutil  # on the way out: its import (bz2, lzma) slows a warm start

            shutil.rmtree(self._runtime_dir, ignore_errors=True)
            self._runtime_dir = None


def _new_id() -> str:
    return uuid.uuid4().hex
