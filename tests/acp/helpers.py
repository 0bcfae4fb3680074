"""Driving `python main.py --acp` with the ACP SDK's own client side, over real stdio pipes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from acp import text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from acp.transports import spawn_stdio_transport

from tests.acp import schema_check
from tests.acp.schema_check import Sender
from tests.support.cli import ROOT, Cli
from tests.support.warm import processes_of

# Updates about the session beside the conversation (issue 34 item 2), which `shown` leaves out.
BESIDE = frozenset(
    {
        "agent_thought_chunk",
        "plan",
        "usage_update",
        "session_info_update",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
    }
)


@dataclass
class Recorder:
    """The client: records every update, answers permission requests as scripted."""

    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = field(default_factory=list)
    choice: str | None = "acknowledge"  # option id to select; None answers "cancelled"
    waiters: list[tuple[Any, asyncio.Future[None]]] = field(default_factory=list)
    # (tool_call, options) -> option id (None: "cancelled"), in place of `choice`; may be async
    choose: Any = None

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        for predicate, future in list(self.waiters):
            if not future.done() and predicate(update):
                future.set_result(None)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        choice = self.choice if self.choose is None else self.choose(tool_call, options)
        if asyncio.iscoroutine(choice):
            choice = await choice
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
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

    def shown(self, session_id: str | None = None) -> list[str]:
        """The kinds of updates of the conversation: no thoughts (acp_server/thoughts.py) and
        none of the session's state beside it (plan, usage, info, commands, mode)."""
        return [k for k in self.kinds(session_id) if k not in BESIDE]

    def thoughts(self) -> str:
        return "".join(u.content.text for u in self.of("agent_thought_chunk"))

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


@dataclass
class FrameLog:
    """Every JSON-RPC frame of one connection in order, as (sender, frame, checked); frames a
    test sends on purpose broken are kept unchecked (their ids still pair their replies)."""

    name: str
    frames: list[tuple[Sender, Any, bool]] = field(default_factory=list)

    def add(self, sender: Sender, frame: Any, checked: bool = True) -> None:
        self.frames.append((sender, frame, checked))

    def problems(self) -> list[str]:
        """Each checked frame against the official schema (tests/acp/schema_check.py), a
        response against the definition of the request it answers."""
        asked: dict[tuple[str, str, Any], str] = {}
        found: list[str] = []
        for n, (sender, frame, checked) in enumerate(self.frames):
            answers = None
            if isinstance(frame, dict) and isinstance(frame.get("id"), str | int | float):
                key = (type(frame["id"]).__name__, frame["id"])
                if "method" in frame:
                    asked[(sender, *key)] = str(frame["method"])
                else:
                    other = "agent" if sender == "client" else "client"
                    answers = asked.pop((other, *key), None)
            if checked:
                found += [
                    f"{self.name} #{n} from the {sender}: {p}"
                    for p in schema_check.problems(frame, sender, answers)
                ]
        return found


FRAME_LOGS: list[FrameLog] = []  # this test's connections (tests/acp/conftest.py checks them)


def frame_log(name: str) -> FrameLog:
    log = FrameLog(name)
    FRAME_LOGS.append(log)
    return log


class RecordingTransport:
    """The client's side of the stdio pipes as the SDK's `Transport`, keeping every frame in
    a FrameLog (a line that is not JSON is kept raw: a problem)."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any, log: FrameLog) -> None:
        self._reader = reader
        self._writer = writer
        self.log = log

    async def send(self, message: dict[str, Any]) -> None:
        self.log.add("client", message)
        self._writer.write((json.dumps(message) + "\n").encode())
        await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                line = end.partial
                if not line:
                    return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                self.log.add("agent", line.decode(errors="replace"))
                continue
            self.log.add("agent", message)
            if isinstance(message, dict):
                return message

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()


READ_LIMIT = 64 * 1024 * 1024  # a frame of jmp's may be far larger than asyncio's 64 KiB


@contextlib.asynccontextmanager
async def acp_agent(
    jmp: Cli, env: dict[str, str] | None = None, name: str = "agent"
) -> AsyncIterator[Agent]:
    """`python main.py --acp` as a child, stderr to a file; closing stdin ends it. Every frame
    both ways is checked against the official schema when the test ends."""
    stderr = jmp.tmp / f"{name}.stderr"
    client = Recorder()
    with stderr.open("wb") as err:
        async with spawn_stdio_transport(
            sys.executable,
            str(ROOT / "main.py"),
            "--acp",
            env=env or jmp.env(),
            cwd=jmp.workspace,
            stderr=err,
            shutdown_timeout=60.0,
            limit=READ_LIMIT,
        ) as (reader, writer, process):
            transport = RecordingTransport(reader, writer, frame_log(name))
            conn = ClientSideConnection(client, transport)
            try:
                yield Agent(conn, process, client, stderr)
            finally:
                await conn.close()


class Wire:
    """`python main.py --acp` with hand-framed JSON-RPC, to see exactly the bytes it writes
    (and to send bytes no SDK would). Every line read is kept in `lines`, and every frame is
    checked against the official schema when the test ends (but those sent with
    `send_line(checked=False)`, broken on purpose)."""

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
        self.log = frame_log(name)

    def send_line(self, data: bytes, checked: bool = False) -> None:
        """Any bytes, then a newline; `checked`: a frame that must validate."""
        assert self.proc.stdin is not None
        with contextlib.suppress(ValueError, RecursionError):
            self.log.add("client", json.loads(data), checked)
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send(self, frame: dict[str, Any]) -> None:
        """A frame that must validate."""
        self.send_line(json.dumps(frame).encode(), checked=True)

    def read(self) -> dict[str, Any]:
        """The next message the agent writes (each line must be one JSON object)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the agent closed stdout"
        self.lines.append(line)
        message = json.loads(line)
        assert isinstance(message, dict), line
        self.log.add("agent", message)
        return message

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; read (and keep) every line until its response."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
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
        for line in rest.splitlines():
            with contextlib.suppress(ValueError):
                self.log.add("agent", json.loads(line))
        return self.proc.wait(timeout=60), rest


def only_updates(rest: bytes) -> bool:
    """True when what the agent wrote after the last response is session/update notifications
    only (a session opened last announces itself after its answer: issue 34)."""
    return all(json.loads(line).get("method") == "session/update" for line in rest.splitlines())


def check_acp_frame(frame: dict[str, Any], method: str | None = None) -> None:
    """One frame the agent wrote validates against the official schema, with no field it does
    not name (tests/acp/schema_check.py); a result only when the request's method is known."""
    found = schema_check.problems(frame, "agent", method)
    if method is None and "result" in frame:
        found = [p for p in found if "which the schema has no agent response" not in p]
    assert not found, found


HOLD_S = 120  # how long a held thread waits at most (a bound on a hang, not a timing)


@contextlib.asynccontextmanager
async def in_process(
    jmp: Cli, monkeypatch: pytest.MonkeyPatch, warm: int = 4
) -> AsyncIterator[tuple[Any, ClientSideConnection, Recorder]]:
    """`jmp --acp`'s serving loop (acp_server.main.run_connection) in this process."""
    env = jmp.env()
    for name in ("TYPESAFE_API_KEY", "TYPESAFE_BASE_URL", "FLASH_API_KEY", "FLASH_BASE_URL"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("JMP_MCP_CONFIG", env["JMP_MCP_CONFIG"])
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    from acp_server.config import Config
    from acp_server.main import run_connection
    from acp_server.server import JmpAcpAgent
    from acp_server.wire import MAX_LINE_BYTES

    agent = JmpAcpAgent(Config(jmp.home), warm=warm)
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours, limit=MAX_LINE_BYTES)
    serving = asyncio.create_task(run_connection(agent, reader, writer))
    client_reader, client_writer = await asyncio.open_connection(sock=theirs, limit=READ_LIMIT)
    client = Recorder()
    transport = RecordingTransport(client_reader, client_writer, frame_log("in-process"))
    conn = ClientSideConnection(client, transport)
    try:
        await conn.initialize(protocol_version=1)
        yield agent, conn, client
    finally:
        await conn.close()
        client_writer.close()  # the agent's input ends: it shuts down as on stdin EOF
        await asyncio.wait_for(serving, HOLD_S)


def hold(entered: threading.Event, release: threading.Event) -> None:
    entered.set()
    assert release.wait(HOLD_S), "never released"


async def until(condition: Any) -> None:
    """Poll a condition the test cannot be told of (a notification has no reply)."""
    for _ in range(HOLD_S * 20):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


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
