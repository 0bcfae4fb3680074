"""Drive `python -m jev_harness.mcp` through the `mcp` SDK's stdio client (a real subprocess)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from tests.harness.helpers import ROOT, HarnessCli

EXAMPLE = ROOT / "examples" / "workspace_task.py"
MARKER = "ORCA-7"


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
                await session.initialize()
                yield Client(session, self)

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

    def __init__(self, session: ClientSession, server: McpServer) -> None:
        self.session, self.server = session, server

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
