"""Drive `python -m jev_harness.mcp` (a real subprocess) through the `mcp` SDK's stdio client, or
through `RawClient`, frames as bytes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, InitializeResult

from tests.harness.helpers import ROOT, HarnessCli

EXAMPLE = ROOT / "examples" / "workspace_task.py"
MARKER = "ORCA-7"


def jmp_version() -> str:
    """jmp's version as pyproject.toml declares it (not the code under test's reading of it)."""
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


class McpServer:
    """One server process: its arguments, its stderr file and its session log."""

    def __init__(
        self,
        cli: HarnessCli,
        script: str | Path,
        inputs: Any,
        *extra: str,
        key: bool = True,
        module: str = "jev_harness.mcp",
        goal: str = "pick b",
    ) -> None:
        self.cli = cli
        self.stderr_path = cli.tmp / f"mcp-stderr-{len(list(cli.tmp.glob('mcp-stderr-*')))}.txt"
        args = ["-m", module, str(script), "--goal", goal, "--inputs", json.dumps(inputs)]
        args += ["--sessions-dir", str(cli.home), *extra]
        import sys

        self.params = StdioServerParameters(
            command=sys.executable, args=args, env=cli.env(key), cwd=str(cli.cwd)
        )

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Client]:
        with self.stderr_path.open("w") as errlog:
            async with (
                stdio_client(self.params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                initialized = await session.initialize()
                yield Client(session, self, initialized)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def served(self) -> tuple[str, int]:
        """(session id, server pid) from the server's first stderr line."""
        found = re.search(r"serving session ([0-9a-f]{32}) \(pid (\d+)\)", self.stderr)
        assert found, self.stderr
        return found.group(1), int(found.group(2))

    def events(self) -> list[dict[str, Any]]:
        return self.cli.events(self.served()[0])

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e["data"] for e in self.events() if e["kind"] == kind]


class Client:
    """Tool calls returning the CallToolResult; helpers for the common shapes."""

    def __init__(
        self, session: ClientSession, server: McpServer, initialized: InitializeResult
    ) -> None:
        self.session, self.server = session, server
        self.initialized = initialized  # the server's answer to initialize

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return await self.session.call_tool(name, arguments or {})

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(name, arguments)
        assert not result.isError, result.content
        assert result.structuredContent is not None
        assert json.loads(result.content[0].text) == result.structuredContent  # type: ignore[union-attr]
        return result.structuredContent

    async def refused(self, code: str, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Assert a rejection with `code`; returns its text."""
        result = await self.call(name, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert result.isError is True, text
        assert result.structuredContent is not None and result.structuredContent["code"] == code
        assert text.split()[0] == code, text
        return text

    async def ref(self) -> str:
        return str((await self.ok("observe"))["state_ref"])


def workspace(cli: HarnessCli) -> dict[str, Any]:
    """A small corpus under the server's working directory; the example's inputs."""
    root = cli.cwd / "proj"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text(
        f"Intro line.\n\nThe release codename is {MARKER}, chosen in May.\n\nOther text.\n"
    )
    (root / "readme.txt").write_text("nothing here\n")
    return {"root": "proj", "queries": ["codename"], "markers": [MARKER], "output": "r.json"}


class RawClient:
    """A hand-written stdio JSON-RPC client: the server as a plain subprocess, frames as bytes.

    Nothing of the `mcp` SDK is between the test and the server, so a frame is sent exactly as
    another client (fastmcp 4, the Inspector) sends it and read exactly as the server wrote it.
    `timeout` only bounds a hang; nothing here asserts on time."""

    def __init__(self, server: McpServer, timeout: float = 90) -> None:
        import subprocess

        self.server, self.timeout = server, timeout
        self._err = server.stderr_path.open("w")
        p = server.params
        self.process = subprocess.Popen(
            [p.command, *p.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=p.env,
            cwd=p.cwd,
        )
        self._buffer = b""
        self._next = 1000  # ids of `request`; a replayed frame brings its own
        self.frames: list[dict[str, Any]] = []  # every frame the server wrote, in order

    def send(self, frame: dict[str, Any] | str) -> None:
        line = frame if isinstance(frame, str) else json.dumps(frame)
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def send_raw(self, line: str, ident: Any) -> dict[str, Any]:
        """Send a frame as written; returns the response with `ident`."""
        self.send(line)
        return self.response(ident)

    def request(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> Any:
        """Send a request with the next id; returns the response frame with that id."""
        self._next += 1
        ident = self._next
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method, **extra}
        if params is not None:
            frame["params"] = params
        self.send(frame)
        return self.response(ident)

    def response(self, ident: Any) -> dict[str, Any]:
        """The server's response to request `ident` (frames before it are kept in `frames`)."""
        return self.wait(lambda f: f.get("id") == ident and "method" not in f, repr(ident))

    def notification(self, method: str) -> dict[str, Any]:
        """The next frame of `method` the server writes (frames before it are kept)."""
        return self.wait(lambda f: f.get("method") == method, method)

    def wait(self, wanted: Any, what: str) -> dict[str, Any]:
        """Read frames (each kept in `frames`) until one is `wanted`; returns it."""
        import select
        import time

        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                frame = json.loads(line)  # the server writes nothing but JSON-RPC frames
                self.frames.append(frame)
                if wanted(frame):
                    return frame
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no {what}; stderr: {self.server.stderr}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError(f"the server closed stdout; stderr: {self.server.stderr}")
            self._buffer += chunk

    def close(self) -> int:
        """Close stdin (the client leaves) and wait for the server's exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(self.timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()
            self._err.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process.poll() is None:
            self.close()
        self._err.close()
