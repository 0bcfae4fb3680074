"""The kernel's handle on the tool worker: specs, validation and calls, over the supervisor.

The worker is spawned by `start()` without waiting, so OpenHands imports while models run.
A death surfaces as `WorkerDied` (its whole tree already gone); `restart()` brings a fresh one.
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any, Protocol

from kernel.config.settings import MODEL_KEYS, bash_limits
from kernel.store.redact import Redactor, environment_secrets
from kernel.supervision.supervisor import Worker, make_runtime_dir
from protocol.messages import (
    ListTools,
    RunTool,
    ToolList,
    ToolResult,
    ToolSpec,
    Validate,
    Validated,
)

READY_TIMEOUT_S = 120.0  # a cold OpenHands import on a busy machine


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
        # shell cannot be kept out (see README: bash is an unconfined shell).
        self.sessions_dir = Path(sessions_dir or self.terminal_dir.parent.parent)
        self.servers = servers
        self.failed_servers: dict[str, str] = {}
        self._worker: Worker | None = None
        self._runtime_dir: Path | None = None
        self._specs: list[ToolSpec] | None = None
        self._lock = threading.Lock()
        # What the worker and its MCP servers print passes this; the Agent hands over the
        # session's redactor (every key and MCP secret). Alone, Tools knows the environment's.
        self.redactor: Redactor | None = None

    def start(self) -> None:
        """Spawn the tool worker now and return at once; idempotent while it lives, and a
        worker that died (its call already recorded as uncertain) is replaced."""
        if self._worker is not None and not self._worker.alive:
            self._stop_worker()  # kills what is left of its tree
        with self._lock:
            if self._worker is not None:
                return
            if self._runtime_dir is None:
                self._runtime_dir = make_runtime_dir()
            config = self._config()
            argv = self._argv() + (["--mcp-config-stdin"] if config else [])
            worker = Worker(
                "tool",
                self._runtime_dir,
                env=dict.fromkeys(MODEL_KEYS),
                argv=argv,
                redact=self._redact,
                stdin_data=config,
            )
            worker.start()
            self._worker = worker

    def _redact(self, text: str) -> str:
        """Every known secret (keys, MCP secrets, token formats) out of what the worker and its
        servers print: an MCP server that logs its arguments must not leak a model key."""
        if self.redactor is None:
            secrets = (*environment_secrets(), *getattr(self.servers, "secrets", ()))
            self.redactor = Redactor(secrets)
        return self.redactor.text(text)

    def _argv(self) -> list[str]:
        limits = bash_limits()  # JMP_BASH_TIMEOUT_S, JMP_BASH_OUTPUT_BYTES (checked at start-up)
        return [
            *("--workspace", str(self.workspace), "--terminal-dir", str(self.terminal_dir)),
            *("--protect", str(self.sessions_dir), "--protect", str(self.terminal_dir.parent)),
            *("--bash-timeout-s", repr(limits["bash_timeout_s"])),
            *("--bash-output-bytes", str(limits["bash_output_bytes"])),
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
        """The running worker (started on first use)."""
        if self._worker is None:
            self.start()
        assert self._worker is not None
        return self._worker

    def specs(self) -> list[ToolSpec]:
        """Built-in and MCP tool specs (cached); waits for the worker to be ready."""
        if self._specs is None:
            self.worker.wait_ready(READY_TIMEOUT_S)
            reply: ToolList = self.worker.request(ListTools(id=_new_id()))
            self.failed_servers = dict(reply.failed_servers)
            self._specs = list(reply.tools)
        return self._specs

    def validate(self, tool: str, args: dict[str, Any]) -> Validated:
        """Native-schema check with no effect; raises WorkerFailed(invalid_arguments, ...)."""
        reply: Validated = self.worker.request(Validate(id=_new_id(), tool=tool, arguments=args))
        return reply

    def run(
        self,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Execute one call; a cancel interrupts it (ToolResult.interrupted) or kills the worker."""
        msg = RunTool(id=call_id, tool=tool, arguments=args, timeout_s=timeout_s)
        # The shell honours timeout_s itself (exit_code -1); the supervisor's limit is a backstop.
        backstop = None if timeout_s is None else timeout_s + 10.0
        reply: ToolResult = self.worker.request(msg, cancel=cancel, timeout_s=backstop)
        return reply

    @property
    def alive(self) -> bool:
        return self._worker is not None and self._worker.alive

    def restart(self) -> None:
        """Replace the worker (after a death): the old tree is killed, a fresh one spawned."""
        self._stop_worker()
        self._specs = None
        self.start()

    def close(self) -> None:
        """Stop the worker and its whole tree; remove the runtime dir. Idempotent."""
        self._stop_worker()
        if self._runtime_dir is not None:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
            self._runtime_dir = None

    def _stop_worker(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()


def _new_id() -> str:
    return uuid.uuid4().hex
