"""Per-prompt overhead of the ACP front end (`jmp --acp`) over an embedded `Agent.run`.

Both sides do the same prompt against their own zero-latency loopback servers: Jev routes
`read`, Flash writes `{"path"}`, the tool worker views a tiny file, Jev routes `done`, the
review says `complete`, Flash answers. Embedded: Session/Models/Tools/Agent in this process,
one `agent.run(prompt=...)` per prompt. ACP: `python main.py --acp` as a child, driven by the
ACP SDK's client side over stdio, one `session/prompt` per prompt, timed at the client (so the
JSON-RPC framing, the thread hand-off, the blocking in-order updates and the pipe are all in).
Start-up is excluded (a warm-up prompt each); prompts alternate between the sides.

Start-up (issue 24 item 7) is a second table: spawn to the answer of `initialize`, beside the
interpreter's own start and the start plus `import acp` (the SDK), interleaved, same machine.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer

PROMPTS = 10  # measured prompts per side, interleaved
ROOT = Path(__file__).resolve().parent.parent
JEV_KEY = "jev-bench-key-0123456789"
FLASH_KEY = "sk-flash-bench-0123456789"


def _script(jev: JevServer, flash: FlashServer) -> None:
    jev.script([{"route": "read"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"path": "tiny.txt"}}}, {"text": "Viewed it."}])


def _workspace(base: Path, name: str) -> Path:
    path = base / name
    path.mkdir()
    (path / "tiny.txt").write_text("x\n")
    return path


class Embedded:
    """One session driven through the Python boundary, as an embedding program would."""

    name = "embedded Agent.run"

    def __init__(self, base: Path) -> None:
        from main import Agent, Models, Session, Settings, Tools, instructions

        self.jev, self.flash = JevServer(), FlashServer()
        env = {
            "TYPESAFE_API_KEY": JEV_KEY,
            "TYPESAFE_BASE_URL": self.jev.url,
            "FLASH_API_KEY": FLASH_KEY,
            "FLASH_BASE_URL": self.flash.url,
        }
        workspace = _workspace(base, "ews")
        session = Session.create(base / "ehome", workspace)
        models = Models(session, Settings.environment(env))
        tools = Tools(workspace, session.directory / "terminal", None)
        self.agent = Agent(session, models, tools, instructions=instructions())

    def prompt(self) -> float:
        _script(self.jev, self.flash)
        began = time.perf_counter()
        result = self.agent.run(prompt="view tiny.txt")
        spent = (time.perf_counter() - began) * 1000
        if result["status"] != "completed":
            raise RuntimeError(f"embedded prompt ended {result['status']}: {result['summary']}")
        return spent

    def close(self) -> None:
        self.agent.close()
        self.jev.close()
        self.flash.close()


class Client:
    """The ACP client: counts updates, never asked for permission here."""

    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates += 1

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no permission request expected in the bench")


class OverAcp:
    """`python main.py --acp` in a child, its client on an event loop in a thread of ours."""

    name = "jmp --acp"

    def __init__(self, base: Path) -> None:
        self.jev, self.flash = JevServer(), FlashServer()
        self.workspace = _workspace(base, "aws")
        inherited = {
            k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))
        }
        self.env = inherited | {
            "TYPESAFE_API_KEY": JEV_KEY,
            "TYPESAFE_BASE_URL": self.jev.url,
            "FLASH_API_KEY": FLASH_KEY,
            "FLASH_BASE_URL": self.flash.url,
            "JMP_SESSIONS_DIR": str(base / "ahome"),
            "JMP_MCP_CONFIG": str(base / "mcp.json"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENHANDS_SUPPRESS_BANNER": "1",
        }
        (base / "mcp.json").write_text('{"mcpServers": {}}')
        self.stderr = (base / "acp.stderr").open("wb")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = Client()
        self._closing: asyncio.Event | None = None
        self._ready: Any = self._submit(self._open())
        self.session = self._ready.result(timeout=120)

    def _submit(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    async def _open(self) -> str:
        from acp import spawn_agent_process

        self._closing = asyncio.Event()
        ready: asyncio.Future[str] = self.loop.create_future()

        async def hold() -> None:
            async with spawn_agent_process(
                self.client,
                sys.executable,
                str(ROOT / "main.py"),
                "--acp",
                env=self.env,
                cwd=self.workspace,
                transport_kwargs={"stderr": self.stderr, "shutdown_timeout": 60.0},
            ) as (conn, _process):
                self.conn = conn
                await conn.initialize(protocol_version=1)
                reply = await conn.new_session(cwd=str(self.workspace), mcp_servers=[])
                ready.set_result(reply.session_id)
                assert self._closing is not None
                await self._closing.wait()

        self._held = asyncio.ensure_future(hold())
        return await ready

    async def _prompt(self) -> float:
        from acp import text_block

        began = time.perf_counter()
        reply = await self.conn.prompt(session_id=self.session, prompt=[text_block("view it")])
        spent = (time.perf_counter() - began) * 1000
        if reply.stop_reason != "end_turn":
            raise RuntimeError(f"ACP prompt stopped {reply.stop_reason}")
        return spent

    def prompt(self) -> float:
        _script(self.jev, self.flash)
        return float(self._submit(self._prompt()).result(timeout=120))

    def close(self) -> None:
        async def finish() -> None:
            assert self._closing is not None
            self._closing.set()
            await self._held

        try:
            self._submit(finish()).result(timeout=120)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()
            self.stderr.close()
            self.jev.close()
            self.flash.close()


def measure(prompts: int = PROMPTS) -> dict[str, list[float]]:
    """Warm both sides, then alternate measured prompts; ms per prompt per side."""
    base = Path(tempfile.mkdtemp(prefix="jbacp", dir="/tmp"))
    sides: list[Any] = []
    out: dict[str, list[float]] = {Embedded.name: [], OverAcp.name: []}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for make in (Embedded, OverAcp):
                sides.append(make(base))
            for side in sides:
                side.prompt()  # warm-up: workers, imports, first connections
            for i in range(prompts):
                for side in sides if i % 2 == 0 else sides[::-1]:
                    out[side.name].append(side.prompt())
    finally:
        for side in sides:
            side.close()
        shutil.rmtree(base, ignore_errors=True)
    return out


def table(data: dict[str, list[float]]) -> str:
    med = statistics.median
    embedded, acp = med(data[Embedded.name]), med(data[OverAcp.name])
    rows = ["| side | median ms/prompt | min | max |", "|---|---|---|---|"]
    for name, samples in data.items():
        rows.append(f"| {name} | {med(samples):.1f} | {min(samples):.1f} | {max(samples):.1f} |")
    rows += [
        "",
        f"ACP/embedded per prompt: {acp / embedded:.2f}x ({acp - embedded:+.1f} ms); one prompt ="
        " route, generate, one `read`, route, review, answer; "
        f"{len(data[Embedded.name])} interleaved prompts per side",
    ]
    return "\n".join(rows)


STARTS = 5  # interleaved start-ups per row
HELLO = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def _spawned(argv: list[str], env: dict[str, str], hello: bool) -> float:
    """ms from spawn to the first line of stdout (hello) or to the exit."""
    import subprocess

    began = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdin is not None and proc.stdout is not None
    if hello:
        proc.stdin.write(HELLO)
        proc.stdin.flush()
        if not proc.stdout.readline():
            raise RuntimeError("jmp --acp did not answer initialize")
    spent = (time.perf_counter() - began) * 1000
    proc.stdin.close()
    proc.wait(timeout=120)
    if not hello:
        spent = (time.perf_counter() - began) * 1000
    return spent


def startup(starts: int = STARTS) -> dict[str, list[float]]:
    """ms per start-up, interleaved: python alone, python + import acp, jmp --acp initialize."""
    base = Path(tempfile.mkdtemp(prefix="jbacps", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))}
    env |= {"JMP_SESSIONS_DIR": str(base / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    rows = {
        "python -c pass": ([sys.executable, "-c", "pass"], False),
        "python -c 'import acp' (the SDK)": ([sys.executable, "-c", "import acp"], False),
        "jmp --acp: initialize answered": ([sys.executable, str(ROOT / "main.py"), "--acp"], True),
    }
    out: dict[str, list[float]] = {name: [] for name in rows}
    try:
        for _ in range(starts):
            for name, (argv, hello) in rows.items():
                out[name].append(_spawned(argv, env, hello))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out


def startup_table(data: dict[str, list[float]]) -> str:
    med = statistics.median
    rows = ["| start-up | median ms | min | max |", "|---|---|---|---|"]
    for name, samples in data.items():
        rows.append(f"| {name} | {med(samples):.0f} | {min(samples):.0f} | {max(samples):.0f} |")
    python, sdk, hello = (med(v) for v in data.values())
    rows += [
        "",
        f"initialize / (python + SDK import): {hello / sdk:.2f}x; initialize - python start: "
        f"{hello - python:+.0f} ms; {len(data['python -c pass'])} interleaved start-ups per row",
    ]
    return "\n".join(rows)


def run() -> str:
    return startup_table(startup()) + "\n\n" + table(measure())


if __name__ == "__main__":
    print(run())
