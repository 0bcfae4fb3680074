"""Driving `python main.py --acp` with the ACP SDK's own client side, over real stdio pipes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from acp import spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    ToolCallUpdate,
)

from tests.support.cli import ROOT, Cli
from tests.support.warm import processes_of


@dataclass
class Recorder:
    """The client: records every update, answers permission requests as scripted."""

    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = field(default_factory=list)
    choice: str | None = "acknowledge"  # option id to select; None answers "cancelled"
    waiters: list[tuple[Any, asyncio.Future[None]]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        for predicate, future in list(self.waiters):
            if not future.done() and predicate(update):
                future.set_result(None)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        if self.choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.choice)
        )

    async def wait_for(self, predicate: Any, timeout: float = 180) -> None:
        """Until an update matching predicate arrives (now or already)."""
        if any(predicate(u) for _, u in self.updates):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append((predicate, future))
        await asyncio.wait_for(future, timeout)

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for s, u in self.updates if session_id in (None, s)]

    def of(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))

    def clear(self) -> None:
        self.updates.clear()


@dataclass
class Agent:
    conn: Any
    process: Any
    client: Recorder
    stderr: Path

    async def new(self, cwd: Path, **kw: Any) -> str:
        await self.conn.initialize(protocol_version=1)
        reply = await self.conn.new_session(cwd=str(cwd), mcp_servers=kw.get("mcp_servers", []))
        return str(reply.session_id)

    async def prompt(self, session_id: str, text: str) -> str:
        reply = await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        return str(reply.stop_reason)


@contextlib.asynccontextmanager
async def acp_agent(
    jmp: Cli, env: dict[str, str] | None = None, name: str = "agent"
) -> AsyncIterator[Agent]:
    """`python main.py --acp` as a child, stderr to a file; closing stdin ends it."""
    stderr = jmp.tmp / f"{name}.stderr"
    client = Recorder()
    with stderr.open("wb") as err:
        async with spawn_agent_process(
            client,
            sys.executable,
            str(ROOT / "main.py"),
            "--acp",
            env=env or jmp.env(),
            cwd=jmp.workspace,
            transport_kwargs={"stderr": err, "shutdown_timeout": 60.0},
        ) as (conn, process):
            yield Agent(conn, process, client, stderr)


class Wire:
    """`python main.py --acp` with hand-framed JSON-RPC, to see exactly the bytes it writes
    (and to send bytes no SDK would). Every line read is kept in `lines`."""

    def __init__(self, jmp: Cli, name: str = "wire") -> None:
        self.stderr_path = jmp.tmp / f"{name}.stderr"
        self.stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "main.py"), "--acp"],
            cwd=jmp.workspace,
            env=jmp.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self.lines: list[bytes] = []
        self.next_id = 0

    def send_line(self, data: bytes) -> None:
        """Any bytes, then a newline."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        """The next message the agent writes (each line must be one JSON object)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the agent closed stdout"
        self.lines.append(line)
        message = json.loads(line)
        assert isinstance(message, dict), line
        return message

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; read (and keep) every line until its response."""
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.send_line(json.dumps(frame).encode())
        while True:
            message = self.read()
            if message.get("id") == self.next_id and "method" not in message:
                return message

    def frames(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]

    def close(self) -> tuple[int, bytes]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        rest = self.proc.stdout.read()
        self.proc.stdout.close()
        self.stderr.close()
        return self.proc.wait(timeout=60), rest


RESPONSES = {
    "initialize": InitializeResponse,
    "session/new": NewSessionResponse,
    "session/prompt": PromptResponse,
    "session/list": ListSessionsResponse,
    "session/load": LoadSessionResponse,
}
ENVELOPE = {"jsonrpc", "id", "method", "params", "result", "error"}


def check_acp_frame(frame: dict[str, Any], method: str | None = None) -> None:
    """One frame the agent wrote is JSON-RPC 2.0 with its keys intact, and its ACP part
    validates against the SDK's schema models (a reply's, when the request's method is known).
    (Issue 24 brings the official JSON schema; this is the SDK's reading of it.)"""
    assert set(frame) <= ENVELOPE and frame.get("jsonrpc") == "2.0", frame
    if frame.get("method") == "session/update":
        SessionNotification.model_validate(frame["params"])
    elif frame.get("method") == "session/request_permission":
        RequestPermissionRequest.model_validate(frame["params"])
    elif "result" in frame and method in RESPONSES:
        RESPONSES[method].model_validate(frame["result"])
    elif "error" in frame:
        error = frame["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str), frame
    else:
        assert "result" in frame or "method" in frame, frame


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def left_running(jmp: Cli, marker: str = "", timeout: float = 10.0) -> list[psutil.Process]:
    """This test's processes (warm or cold: `processes_of`), or with a command marker, alive
    after timeout."""

    def scan() -> list[psutil.Process]:
        return processes_of(jmp.home, jmp.tmp, marker)

    deadline = time.monotonic() + timeout
    while scan() and time.monotonic() < deadline:
        time.sleep(0.1)
    return scan()
