"""The front ends: one driver each, running one scripted task the way its real client would.

A driver starts its front end as a real subprocess (wrapped by `world.wrap`, i.e. confined
when the row needs it), in the world's launch directory, with the world's environment, talks to
it with the official client (a pipe reader for the CLIs, the ACP SDK, the MCP SDK; the Python
API through tests/security/embed.py, a program that embeds it), and returns an `Outcome`:
everything the client received, the front end's stderr, the session, what it reported.

Two families share a scripted task shape (tests/security/scenarios.py scripts the models):
- "agent" (CLI, ACP, Python API): Jev routes `bash`, Flash writes the command; the untrusted
  code is the model's shell.
- "harness" (jev-harness run, MCP server, open_session): the task script
  tests/security/probe_task.py; the untrusted code is the script.

To add a front end: subclass `FrontEnd`, implement `drive`, give it `entries` (the entry points
it covers, as test_coverage.py names them) and `surfaces`, and add it to `FRONT_ENDS`. Every row
whose needs its surfaces meet then runs on it, on every spawn path.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.security.world import HERE, PROBE_TASK, World

BIN = Path(sys.executable).parent  # the venv's console scripts
EMBED = HERE / "embed.py"

# Surfaces: what a front end has, so rows that need one run exactly where it exists.
SHELL = "shell"  # the model's bash tool runs commands (agent family)
TASK_SCRIPT = "task_script"  # a jev-harness task script runs (harness family)
MCP_CONFIG = "mcp_config"  # JMP_MCP_CONFIG servers are started for the run
ANSWER = "answer"  # the model's final prose reaches the client
REOPEN = "reopen"  # a finished session can be opened again from this front end
VIEW = "view"  # a readable view for a person at a terminal (not JSON)
ACP_FRAMES = "acp_frames"  # Outcome.items are the ACP frames the agent wrote
KEY_FILE = "key_file"  # reads the keys `jmp --setup` stored (kernel/config/keys.py)


def needs(*surfaces: str) -> Any:
    """A row runs only on the front ends that have all these surfaces."""
    import pytest

    return pytest.mark.matrix(needs=frozenset(surfaces))


@dataclass
class Outcome:
    """What one run gave its client."""

    code: int | None  # the front end's exit status
    output: str  # everything the client received, as text (lines, frames, results)
    stderr: str
    session_id: str | None
    reported: str | None  # the final status (or ACP stop reason) the client was given
    told_uncertain: bool  # the client was told that a call's outcome is unknown
    answer: str = ""  # the final prose the client was shown (ANSWER surface)
    items: list[Any] = field(default_factory=list)  # the parsed lines / frames / results


class Running:
    """A front end being driven in a background thread; `heard` is what its client has
    received so far (JSON lines, ACP frames, MCP results), as it arrives."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._pid_source: Any = None
        self._started = threading.Event()
        self._done = threading.Event()
        self._outcome: Outcome | None = None
        self._error: BaseException | None = None
        self._heard: list[Any] = []
        self._news = threading.Condition()

    def hear(self, item: Any) -> None:
        """The client received `item` (called by the driver, at once)."""
        with self._news:
            self._heard.append(item)
            self._news.notify_all()

    @property
    def heard(self) -> list[Any]:
        with self._news:
            return list(self._heard)

    def wait_heard(self, wanted: Any, timeout: float) -> list[Any]:
        """What the client received, once an item of it satisfies `wanted`; AssertionError
        when the front end ends first or `timeout` passes (a bound on a hang)."""
        deadline = time.monotonic() + timeout
        with self._news:
            while not any(wanted(item) for item in self._heard):
                left = deadline - time.monotonic()
                assert left > 0, f"the client was never told: {self._heard[-5:]}"
                assert not self._done.is_set(), f"ended first: {self._heard[-5:]}"
                self._news.wait(min(left, 0.2))
            return list(self._heard)

    def started(self, pid: int | None = None, source: Any = None) -> None:
        self._pid, self._pid_source = pid, source
        self._started.set()

    def kernel_pid(self, timeout: float = 120) -> int:
        """The pid of the process that runs the kernel (the front end's own)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._started.is_set():
                pid = self._pid if self._pid is not None else self._pid_source()
                if pid is not None:
                    return int(pid)
            if self._done.is_set():
                self.wait(0)
                raise AssertionError("the front end ended before its pid was known")
            time.sleep(0.05)
        raise AssertionError("the front end's pid never became known")

    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float = 300) -> Outcome:
        assert self._done.wait(timeout), "the front end did not finish"
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        return self._outcome

    def finish(self, outcome: Outcome | None, error: BaseException | None) -> None:
        self._outcome, self._error = outcome, error
        self._done.set()


class FrontEnd:
    name = ""
    family = ""  # "agent" or "harness"
    entries: tuple[str, ...] = ()  # entry points covered (test_coverage.py)
    surfaces: frozenset[str] = frozenset()
    # How it ends a run that ended blocked: the status (or stop reason) its client is given,
    # and its exit status (None: its client cannot see one).
    blocked_reported = "blocked"
    blocked_exit: int | None = 0
    # What reopening a session blocked by an uncertain call appends to its log (REOPEN).
    reopen_appends: tuple[str, ...] = ()

    def start(self, world: World, task: dict[str, Any]) -> Running:
        """Drive the front end through `task` (scenarios.py: `prompt` for the agent family,
        `goal` and `inputs` for the harness family) in a thread; returns at once."""
        running = Running()

        def drive() -> None:
            try:
                outcome = self.drive(world, task, running)
            except BaseException as exc:
                running.finish(None, exc)
            else:
                running.finish(outcome, None)

        threading.Thread(target=drive, daemon=True, name=f"drive-{self.name}").start()
        return running

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        raise NotImplementedError

    def reopen(self, world: World, session_id: str) -> Outcome:
        """Open the finished session again (REOPEN surface)."""
        raise NotImplementedError


# ---- helpers ------------------------------------------------------------------------------


def _lines(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line one JSON object (the --json contract); fails the row otherwise."""
    items = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert all(isinstance(item, dict) for item in items), stdout[-2000:]
    return items


def _result(items: list[dict[str, Any]]) -> dict[str, Any]:
    if items and items[-1].get("kind") == "result":
        return dict(items[-1]["data"])
    return {}


def _popen_outcome(
    world: World, argv: list[str], running: Running, timeout: float = 400
) -> tuple[int, str, str]:
    """Run the front end; each stdout line is heard (`Running.hear`, decoded when it is
    JSON) as it arrives."""
    proc = subprocess.Popen(
        world.wrap(argv),
        cwd=world.launch,
        env=world.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,  # a terminal's foreground job is a group of its own
    )
    running.started(proc.pid)  # setpriv execs: the same pid runs the front end
    assert proc.stdout is not None and proc.stderr is not None
    stderr = proc.stderr
    errs: list[str] = []
    reader = threading.Thread(target=lambda: errs.append(stderr.read()), daemon=True)
    reader.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            running.hear(_decoded(line))
    finally:
        timer.cancel()
        proc.stdout.close()
        reader.join()
        stderr.close()
    code = proc.wait()
    out, err = "".join(lines), "".join(errs)
    if expired.is_set():
        raise AssertionError(f"{argv[:3]} did not finish: {err[-2000:]}")
    return code, out, err


def _decoded(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return line


def _lined_outcome(code: int, out: str, err: str) -> Outcome:
    """A front end whose stdout is JSON lines ending in a `result` line."""
    items = _lines(out)
    result = _result(items)
    kinds = [item.get("kind") for item in items]
    return Outcome(
        code=code,
        output=out,
        stderr=err,
        session_id=result.get("session_id")
        or next((i.get("session_id") for i in items if i.get("session_id")), None),
        reported=result.get("status"),
        told_uncertain="tool_uncertain" in kinds,
        answer=str(result.get("summary") or ""),
        items=items,
    )


# ---- the agent family ---------------------------------------------------------------------


class Cli(FrontEnd):
    """`jmp --json --workspace WS PROMPT` (the console script; `python main.py` is the same)."""

    name = "cli"
    family = "agent"
    entries = ("console:jmp", "script:main.py", "module:cli.main")
    surfaces = frozenset({SHELL, MCP_CONFIG, ANSWER, REOPEN, VIEW, KEY_FILE})
    blocked_exit = 2
    reopen_appends = ("final",)  # blocked again, running nothing

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        argv = [str(BIN / "jmp"), "--json", "--workspace", str(world.launch), task["prompt"]]
        return _lined_outcome(*_popen_outcome(world, argv, running))

    def reopen(self, world: World, session_id: str) -> Outcome:
        argv = [str(BIN / "jmp"), "--json", "--session", session_id]
        return _lined_outcome(*_popen_outcome(world, argv, Running()))


class Api(FrontEnd):
    """`main.Session / Models / Tools / Agent` embedded in a program (tests/security/embed.py)."""

    name = "api"
    family = "agent"
    entries = ("python:main.Agent",)
    surfaces = frozenset({SHELL, MCP_CONFIG, ANSWER})

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        spec = {"home": str(world.home), "workspace": str(world.launch), "prompt": task["prompt"]}
        argv = [sys.executable, str(EMBED), "agent", json.dumps(spec)]
        return _lined_outcome(*_popen_outcome(world, argv, running))


class Acp(FrontEnd):
    """`jmp --acp`, driven by the ACP SDK's client over its stdio."""

    name = "acp"
    family = "agent"
    entries = ("console:jmp --acp", "script:main.py --acp")
    surfaces = frozenset({SHELL, MCP_CONFIG, ANSWER, ACP_FRAMES, KEY_FILE})
    blocked_reported = "end_turn"  # the turn ends; the failed update and the message say why

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        return asyncio.run(self._drive(world, task, running))

    async def _drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        from acp import spawn_agent_process, text_block
        from acp.connection import StreamDirection

        from tests.acp.helpers import Recorder

        client = Recorder()
        frames: list[dict[str, Any]] = []

        def observe(event: Any) -> None:
            if event.direction == StreamDirection.INCOMING:
                frames.append(event.message)
                running.hear(event.message)

        argv = world.wrap([str(BIN / "jmp"), "--acp"])
        stderr = world.tmp / "acp.stderr"
        stop = None
        with stderr.open("wb") as err:
            async with spawn_agent_process(
                client,
                argv[0],
                *argv[1:],
                env=world.env(),
                cwd=world.launch,
                transport_kwargs={"stderr": err, "shutdown_timeout": 60.0},
                observers=[observe],
            ) as (conn, process):
                running.started(process.pid)
                await conn.initialize(protocol_version=1)
                reply = await conn.new_session(cwd=str(world.launch), mcp_servers=[])
                session_id = str(reply.session_id)
                answer = await asyncio.wait_for(
                    conn.prompt(session_id=session_id, prompt=[text_block(task["prompt"])]), 400
                )
                stop = str(answer.stop_reason)
        told = (
            any(
                u.status == "failed" and "Outcome unknown" in _acp_text(u)
                for u in client.of("tool_call_update")
            )
            and "Acknowledge" in client.text()
        )  # and how to go on (the next prompt asks)
        return Outcome(
            code=process.returncode,
            output="\n".join(json.dumps(f) for f in frames),
            stderr=stderr.read_text(errors="replace"),
            session_id=session_id,
            reported=stop,
            told_uncertain=told,
            answer=client.text(),
            items=frames,
        )


def _acp_text(update: Any) -> str:
    parts = []
    for item in update.content or []:
        content = getattr(item, "content", None)
        parts.append(str(getattr(content, "text", "") or ""))
    return " ".join(parts)


# ---- the harness family -------------------------------------------------------------------


def _harness_args(world: World, task: dict[str, Any]) -> list[str]:
    args = [str(PROBE_TASK), "--goal", task["goal"], "--inputs", json.dumps(task["inputs"])]
    return [*args, "--context", json.dumps(task["context"])] if "context" in task else args


class HarnessRun(FrontEnd):
    """`jev-harness run SCRIPT --goal G --inputs J --sessions-dir HOME --json`."""

    name = "harness"
    family = "harness"
    entries = ("console:jev-harness", "module:jev_harness.cli")
    surfaces = frozenset({TASK_SCRIPT, REOPEN, KEY_FILE})
    blocked_exit = 2

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        argv = [str(BIN / "jev-harness"), "run", *_harness_args(world, task)]
        argv += ["--sessions-dir", str(world.home), "--json"]
        outcome = _lined_outcome(*_popen_outcome(world, argv, running))
        outcome.told_uncertain = outcome.told_uncertain or "uncertain" in outcome.answer
        return outcome

    def reopen(self, world: World, session_id: str) -> Outcome:
        """`jev-harness inspect`: one JSON object, no result line."""
        argv = [str(BIN / "jev-harness"), "inspect", session_id]
        code, out, err = _popen_outcome(
            world, [*argv, "--sessions-dir", str(world.home), "--json"], Running()
        )
        items = _lines(out)
        data = items[0] if items else {}
        assert set(data) == {"session_id", "status", "summary", "artifact"}, out  # HARNESS.md 6
        return Outcome(
            code,
            out,
            err,
            data.get("session_id"),
            data.get("status"),
            False,
            answer=str(data.get("summary") or ""),
            items=items,
        )


class HarnessApi(FrontEnd):
    """`jev_harness.open_session(...).delegate()` embedded in a program (embed.py)."""

    name = "harness_api"
    family = "harness"
    entries = ("python:jev_harness.open_session",)
    surfaces = frozenset({TASK_SCRIPT})

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        spec = {"home": str(world.home), "script": str(PROBE_TASK)}
        spec |= {"goal": task["goal"], "inputs": task["inputs"], "context": task.get("context")}
        argv = [sys.executable, str(EMBED), "harness", json.dumps(spec)]
        return _lined_outcome(*_popen_outcome(world, argv, running))


class Mcp(FrontEnd):
    """`jev-harness-mcp SCRIPT ...` (the documented command), driven by the MCP SDK's stdio
    client: `run_task`."""

    name = "mcp"
    family = "harness"
    entries = ("console:jev-harness-mcp",)
    surfaces = frozenset({TASK_SCRIPT, KEY_FILE})
    blocked_exit = None

    def drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        import anyio

        return anyio.run(self._drive, world, task, running)

    async def _drive(self, world: World, task: dict[str, Any], running: Running) -> Outcome:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        stderr = world.tmp / "mcp.stderr"
        command = str(Path(sys.executable).parent / "jev-harness-mcp")
        argv = world.wrap([command, *_harness_args(world, task)])
        argv += ["--sessions-dir", str(world.home)]
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env=world.env(), cwd=str(world.launch)
        )

        def served() -> tuple[str, int] | None:
            text = stderr.read_text(errors="replace") if stderr.exists() else ""
            found = re.search(r"serving session ([0-9a-f]{32}) \(pid (\d+)\)", text)
            return (found.group(1), int(found.group(2))) if found else None

        results: list[Any] = []
        with stderr.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                results.append(await session.initialize())
                running.started(source=lambda: (served() or (None, None))[1])
                result = await _unless_dead(session.call_tool("run_task", {}), served)
                results.append(result)
                running.hear(result)
        data = result.structuredContent or {}
        summary = str(data.get("summary") or "")
        found = served()
        return Outcome(
            code=None,  # the SDK's client does not expose the server process
            output="\n".join(r.model_dump_json() for r in results),
            stderr=stderr.read_text(errors="replace"),
            session_id=data.get("session_id") or (found[0] if found else None),
            reported=data.get("status"),
            told_uncertain=data.get("status") == "blocked" and "uncertain" in summary,
            answer=summary,
            items=results,
        )


async def _unless_dead(call: Any, served: Any) -> Any:
    """The call's result; raises ConnectionError once the server process is gone (the SDK's
    client can wait for ever on a request to a dead server)."""
    import anyio
    import psutil

    outcome: dict[str, Any] = {}

    async with anyio.create_task_group() as tg:

        async def answer() -> None:
            outcome["result"] = await call
            tg.cancel_scope.cancel()

        async def watch() -> None:
            while True:
                await anyio.sleep(0.2)
                found = served()
                if found and not psutil.pid_exists(found[1]):
                    outcome["dead"] = found[1]
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(answer)
        tg.start_soon(watch)
    if "result" in outcome:
        return outcome["result"]
    raise ConnectionError(f"the MCP server (pid {outcome.get('dead')}) died")


FRONT_ENDS: dict[str, FrontEnd] = {
    fe.name: fe for fe in (Cli(), Acp(), Api(), HarnessRun(), Mcp(), HarnessApi())
}
