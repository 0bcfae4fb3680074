"""The jev-harness MCP server's overhead per call: `observe` and `arguments` through
`python -m jev_harness.mcp` (the SDK's stdio client, timed at the client) against the same
calls on an in-process `open_session` (direct-only, the workspace example on a tiny corpus).
Interleaved rounds, medians; a ratio, not a speed claim."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "workspace_task.py"
INPUTS = {"root": "proj", "queries": ["codename"], "markers": ["ORCA-7"], "output": "r.json"}
ROUNDS = 30


def _corpus(work: Path) -> None:
    (work / "proj" / "docs").mkdir(parents=True)
    (work / "proj" / "docs" / "notes.md").write_text("The release codename is ORCA-7.\n")


def _pair(direct: Any, ref: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    direct.observe()
    t1 = time.perf_counter()
    direct.arguments("files.search", {}, ref)
    return t1 - t0, time.perf_counter() - t1


async def _measure(work: Path, direct: Any) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    args = ["-m", "jev_harness.mcp", str(EXAMPLE), "--goal", "g", "--inputs", json.dumps(INPUTS)]
    args += ["--direct-only", "--sessions-dir", str(work / "sessions")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(work))
    times: dict[str, list[float]] = {k: [] for k in ("mcp observe", "mcp arguments")}
    times.update({"direct observe": [], "direct arguments": []})
    ref = direct.observe()["state_ref"]
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            mref = (await s.call_tool("observe", {})).structuredContent["state_ref"]  # type: ignore[index]
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                await s.call_tool("observe", {})
                t1 = time.perf_counter()
                await s.call_tool("arguments", {"tool": "files.search", "state_ref": mref})
                times["mcp observe"].append(t1 - t0)
                times["mcp arguments"].append(time.perf_counter() - t1)
                observe, arguments = _pair(direct, ref)
                times["direct observe"].append(observe)
                times["direct arguments"].append(arguments)
    return times


def run() -> str:
    import anyio

    from jev_harness.session import open_session

    with tempfile.TemporaryDirectory(prefix="jb", dir="/tmp") as tmp:
        work = Path(tmp)
        _corpus(work)
        here = os.getcwd()
        os.chdir(work)
        try:
            direct = open_session(
                EXAMPLE, "g", INPUTS, sessions_dir=work / "sessions", direct_only=True
            )
            try:
                times = anyio.run(_measure, work, direct)
            finally:
                direct.close()
        finally:
            os.chdir(here)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    lines = ["| call | median ms | min | max |", "|---|---|---|---|"]
    for k, v in times.items():
        lines.append(f"| {k} | {med[k]:.1f} | {min(v) * 1000:.1f} | {max(v) * 1000:.1f} |")
    for call in ("observe", "arguments"):
        ratio = med[f"mcp {call}"] / med[f"direct {call}"]
        extra = med[f"mcp {call}"] - med[f"direct {call}"]
        lines.append(f"\nMCP/direct {call}: {ratio:.2f}x (+{extra:.1f} ms)")
    return "\n".join(lines)
