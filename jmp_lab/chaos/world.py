"""One iteration's world: directories, MCP config, and loopback models that follow the plan.

The models do not replay a fixed script (a kill can land between any two requests): each
answer is derived from the session's log as it is on disk at that moment. Route: the first
step of the current request whose token is in no `tool_started`, else `done`; review:
`complete`; generation: that step's arguments; answers: prose. So after any kill the session
goes on where the log says it is, and a witness seen twice can only be a re-run by jmp.

A power iteration puts the sessions directory on a lossy disk (`disk`, jmp_lab/chaos/powercut),
backed by `root/disk`; the workspace and the witness files stay outside it: they are the
world, where effects stay done.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jmp_lab.chaos.plan import IterationPlan, Step
from jmp_lab.chaos.powercut.control import LossyDisk
from jmp_lab.servers import MCP_SERVER
from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer, JevState

FAKE_MCP = Path(MCP_SERVER)
Hook = Callable[..., None]


def read_log(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a log that decode as JSON (the checker is strict, this is not)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    events = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


class HookedChunks(list):  # type: ignore[type-arg]
    """A reply's SSE events; `hook(n, last)` runs before event n (a kill lands mid-stream)."""

    def __init__(self, chunks: list[bytes], hook: Hook) -> None:
        super().__init__(chunks)
        self.hook = hook

    def __iter__(self) -> Any:
        count = 0
        for count, chunk in enumerate(list.__iter__(self)):
            self.hook(count, False)
            yield chunk
        self.hook(count + 1, True)


class World:
    """Directories and servers of one iteration; hooks are set per invocation by the driver."""

    def __init__(self, plan: IterationPlan, root: Path, warm: Path) -> None:
        self.plan = plan
        self.root = root
        self.warm = warm  # the campaign's own warm pool directory (never the user's pool)
        self.home = root / "sessions"
        self.workspace = root / "ws"
        self.workspace.mkdir(parents=True)
        self.disk: LossyDisk | None = None
        if plan.power:
            self.disk = LossyDisk(root / "disk", self.home, plan.power, root / "disk-state")
            self.disk.start()
        self.session_id: str | None = None
        self.on_route: Hook | None = None
        self.on_chunk: Hook | None = None
        self.extra: dict[str, str] = {}  # more environment for jmp (a broken build's hook)
        self._write_mcp_config()
        self.jev = JevServer()
        self.flash = FlashServer()
        self._hook_servers()

    # --- setup --------------------------------------------------------------------

    def _write_mcp_config(self) -> None:
        """The witness MCP server, where the plan calls or kills it; else no server at all:
        its start (the `mcp` SDK's import, 1.5 s of CPU) is on the path of every run."""
        needed = any(step.tool.startswith("mcp.") for step in self.plan.steps()) or any(
            kill.target == "mcp" for kill in self.plan.kills
        )
        if not needed:
            (self.root / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
            return
        server = {
            "command": sys.executable,
            "args": [str(FAKE_MCP), "--pid-file", str(self.root / "mcp.pid")],
            "env": {
                "FAKE_MCP_WITNESS": str(self.workspace / "mcp_witness.log"),
                "CHAOS_MCP_TOKEN": self.plan.keys["mcp"],
            },
        }
        (self.root / "mcp.json").write_text(json.dumps({"mcpServers": {"fake": server}}))

    def _hook_servers(self) -> None:
        jev_state, flash_state = self.jev.state, self.flash.state

        def respond(body: dict[str, Any]) -> dict[str, Any]:
            if self.on_route is not None:
                self.on_route()
            with jev_state.lock:
                jev_state.steps = [self._jev_step(body["questions"])]
            return JevState.respond(jev_state, body)

        def next_item(body: dict[str, Any]) -> dict[str, Any]:
            return self._flash_item(body)

        jev_state.respond = respond  # type: ignore[method-assign]
        flash_state.next_item = next_item  # type: ignore[method-assign]
        handler = self.flash._server.RequestHandlerClass
        world = self

        class ChaosFlashHandler(handler):  # type: ignore[misc, valid-type]
            def _stream(self, chunks: list[bytes], fault: Any) -> None:
                hook = world.on_chunk
                if hook is not None:
                    chunks = HookedChunks(chunks, hook)
                super()._stream(chunks, fault)

        self.flash._server.RequestHandlerClass = ChaosFlashHandler

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))}
        env.pop("DEEPSEEK_API_KEY", None)
        env.update(
            TYPESAFE_API_KEY=self.plan.keys["jev"],
            TYPESAFE_BASE_URL=self.jev.url,
            FLASH_API_KEY=self.plan.keys["flash"],
            FLASH_BASE_URL=self.flash.url,
            JMP_SESSIONS_DIR=str(self.home),
            JMP_MCP_CONFIG=str(self.root / "mcp.json"),
            PYTHONUNBUFFERED="1",
            JMP_WARM_DIR=str(self.warm),
            JMP_WARM="1" if self.plan.warm else "0",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENHANDS_SUPPRESS_BANNER="1",
        )
        env.update(self.extra)
        return env

    # --- what the log says ----------------------------------------------------------

    def log_path(self) -> Path | None:
        if self.session_id:
            return self.home / self.session_id / "events.jsonl"
        found = sorted(self.home.glob("*/events.jsonl"), key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None

    def events(self) -> list[dict[str, Any]]:
        path = self.log_path()
        return read_log(path) if path else []

    def session_files(self) -> dict[str, bytes]:
        """Every file of the sessions directory as processes see it (a power iteration reads
        the disk's backing directory: the mount may be frozen)."""
        base = self.disk.backing if self.disk is not None else self.home
        files = {}
        for path in base.rglob("*"):
            if path.is_file() and not path.is_symlink():
                try:
                    files[str(path.relative_to(base))] = path.read_bytes()
                except OSError:
                    continue
        return files

    def next_step(self) -> Step | None:
        """The current request's first step not yet started (by its token), else None."""
        events = self.events()
        users = sum(1 for e in events if e.get("kind") == "user")
        started = " ".join(
            json.dumps(e.get("data", {})) for e in events if e.get("kind") == "tool_started"
        )
        request = self.plan.requests[min(max(users, 1), len(self.plan.requests)) - 1]
        return next((s for s in request if s.token not in started), None)

    def arguments(self, step: Step) -> dict[str, Any]:
        args = dict(step.arguments)
        if "path" in args:
            args["path"] = str(self.workspace / args["path"])
        return args

    # --- answers --------------------------------------------------------------------

    def _jev_step(self, questions: dict[str, Any]) -> dict[str, Any]:
        if "completion_review" in questions:
            return {"completion_review": "complete"}
        step = self.next_step()
        return {"route": step.tool if step else "done"}

    def _flash_item(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return {"text": f"Finished the request of iteration {self.plan.index}."}
        step = self.next_step()
        if step is None:  # nothing planned is left: an answer the validator will refuse
            return {"tool_call": {"arguments": {}}}
        return {"tool_call": {"arguments": self.arguments(step)}}

    # --- faults on the servers ------------------------------------------------------

    def server_fault(self, kind: str, value: float) -> None:
        if kind == "jev_delay":
            self.jev.fault("delay", seconds=value)
        elif kind == "jev_http500":
            self.jev.fault("http500", retry_after_ms=10)
        elif kind == "flash_slow":
            self.flash.fault("slow", seconds=value)
        elif kind == "flash_cut":
            self.flash.fault("cut", after_chunks=int(value))

    def clear_faults(self) -> None:
        self.jev.clear_faults()
        self.flash.clear_faults()

    def close(self, keep: bool) -> None:
        self.jev.close()
        self.flash.close()
        if self.disk is not None:
            self.disk.stop()
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
