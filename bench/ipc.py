"""IPC cost of a tool call: `read` of a tiny file through the tool worker vs. in-process.

Both are measured side by side, interleaved, in one run (median over N), so machine load hits
both alike. The goal is under 3 ms added per call.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kernel.store.session import Session
from kernel.supervision.tools import Tools
from protocol.events import ToolFinishedData, ToolStartedData

N = 300


def ipc_call(tools: Tools, path: str) -> Callable[[], object]:
    """One `read` round trip through Worker.request (the IPC part of a kernel tool step)."""
    return lambda: tools.run(uuid.uuid4().hex, "read", {"path": path})


def kernel_step(session: Session, tools: Tools, path: str) -> Callable[[], object]:
    """The kernel's whole tool step: tool_started (fsync), IPC round trip, tool_finished."""

    def step() -> object:
        call_id = uuid.uuid4().hex[:16]
        session.append(
            ToolStartedData(call_id=call_id, tool="read", target=path, request=""), durable=True
        )
        result = tools.run(call_id, "read", {"path": path})
        session.append(
            ToolFinishedData(
                call_id=call_id, tool="read", status=result.status, text=result.text[:2000]
            )
        )
        return result

    return step


def inprocess_call(workspace: Path, path: str) -> Callable[[], object]:
    """The same executor call in this process."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    from openhands.tools.file_editor.definition import FileEditorAction
    from openhands.tools.file_editor.impl import FileEditorExecutor

    executor = FileEditorExecutor(workspace_root=str(workspace))
    return lambda: executor(FileEditorAction(command="view", path=path))


def side_by_side(calls: dict[str, Callable[[], object]], n: int = N) -> dict[str, list[float]]:
    """Interleaved timings in milliseconds, after a short warm-up."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(n + 20):
        for name, call in calls.items():
            began = time.perf_counter()
            call()
            if round_ >= 20:
                times[name].append((time.perf_counter() - began) * 1000)
    return times


def run() -> str:
    base = Path(tempfile.mkdtemp(prefix="jb", dir="/tmp"))
    workspace = base / "ws"
    workspace.mkdir()
    (workspace / "tiny.txt").write_text("x\n")
    path = str(workspace / "tiny.txt")
    tools = Tools(workspace, base / "terminal")
    session = Session.create(base / "sessions", workspace)
    try:
        tools.start()
        tools.specs()
        times = side_by_side(
            {
                "ipc": ipc_call(tools, path),
                "step": kernel_step(session, tools, path),
                "inproc": inprocess_call(workspace, path),
            }
        )
    finally:
        tools.close()
        session.close()
        shutil.rmtree(base, ignore_errors=True)
    step = statistics.median(times["step"])
    ipc, local = statistics.median(times["ipc"]), statistics.median(times["inproc"])
    p90 = sorted(times["ipc"])[int(0.9 * len(times["ipc"]))]
    rows = [
        "| path | median ms | p90 ms |",
        "|---|---|---|",
        f"| read via tool worker (Worker.request) | {ipc:.3f} | {p90:.3f} |",
        f"| read in-process (FileEditorExecutor) | {local:.3f} | "
        f"{sorted(times['inproc'])[int(0.9 * N)]:.3f} |",
        "",
        f"| kernel step: tool_started fsync + IPC + tool_finished | {step:.3f} | "
        f"{sorted(times['step'])[int(0.9 * N)]:.3f} |",
        "",
        f"IPC added per call: {ipc - local:.3f} ms (ratio {ipc / local:.1f}x); whole kernel "
        f"step added: {step - local:.3f} ms (goal < 3 ms), N={N}",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(run())
