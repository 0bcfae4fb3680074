"""ACP `session/load` of long sessions (issue 25): time, peak RSS, updates and bytes sent, at 1k,
100k and 1M events, beside `Session.open` of the same log.

The logs are bench/long_session.py's (`write_log`, in a child process), opened once first so
that events.index is the one a full check builds. Each load is a fresh `python main.py --acp`
driven by a hand-framed JSON-RPC client (so the client's own decoding costs nothing):
`initialize`, `session/list` (answered once the SDK has loaded), then `session/load` timed from
its request to its response, every notification before it counted with its bytes on the wire.
Peak RSS is the agent process's VmHWM, with what it held before the load beside it; "read" is
the bytes it read during the load (its /proc rchar: every read call, page cache or not). Rows: the
default (the last JMP_ACP_LOAD_TURNS=50 turns) on the first load (no acp-modes.json yet: the
mode and approvals are read from the log's bytes) and again (from acp-modes.json), and for the
smaller sizes the whole history (JMP_ACP_LOAD_TURNS=0, what every load sent before). `open` is
bench/long_session.py's row: a fresh process, Session.open alone.

    python -m bench acp_load        (JMP_BENCH_ACP_LOAD=1000,100000 for fewer sizes;
                                     JMP_BENCH_ACP_LOAD_ALL=100000: the largest size replayed whole)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.long_session import measure as measure_open

SIZES = tuple(
    int(n) for n in os.environ.get("JMP_BENCH_ACP_LOAD", "1000,100000,1000000").split(",") if n
)
ALL_UP_TO = int(os.environ.get("JMP_BENCH_ACP_LOAD_ALL", "100000"))  # 1M whole: ~10 minutes
ROOT = Path(__file__).resolve().parent.parent


def _frame(method: str, rid: int, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def _hwm(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        line = next(x for x in f if x.startswith("VmHWM"))
    return int(line.split()[1]) / 1024


def _read(pid: int) -> int:
    """The bytes the process has read so far (its `rchar`: every read, page cache or not)."""
    with open(f"/proc/{pid}/io") as f:
        return int(next(x for x in f if x.startswith("rchar")).split()[1])


def load(home: Path, workspace: Path, sid: str, turns: str | None) -> dict[str, Any]:
    """One `session/load` in a fresh `jmp --acp`: ms, updates, bytes, peak RSS (MB) after and
    before it, the bytes the agent read meanwhile, and the response's `_meta.jmp.replay`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))}
    env |= {
        "JMP_SESSIONS_DIR": str(home),
        "JMP_MCP_CONFIG": str(home.parent / "mcp.json"),
        "JMP_WARM": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENHANDS_SUPPRESS_BANNER": "1",
    }
    if turns is not None:
        env["JMP_ACP_LOAD_TURNS"] = turns
    (home.parent / "mcp.json").write_text('{"mcpServers": {}}')
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "--acp"],
        cwd=workspace,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:

        def ask(frame: bytes, rid: int) -> tuple[dict[str, Any], int, int]:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(frame + b"\n")
            proc.stdin.flush()
            count = size = 0
            while True:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"jmp --acp exited {proc.wait()}")
                message = json.loads(line)
                if message.get("id") == rid:
                    return message, count, size
                count, size = count + 1, size + len(line)

        ask(_frame("initialize", 1, {"protocolVersion": 1}), 1)
        ask(_frame("session/list", 2, {}), 2)  # answered once the SDK is loaded
        before, read = _hwm(proc.pid), _read(proc.pid)
        params = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        began = time.perf_counter()
        reply, count, size = ask(_frame("session/load", 3, params), 3)
        ms = (time.perf_counter() - began) * 1000
        if "error" in reply:
            raise RuntimeError(f"session/load failed: {reply['error']}")
        peak, read = _hwm(proc.pid), _read(proc.pid) - read
        meta = (reply["result"].get("_meta") or {}).get("jmp", {}).get("replay", {})
        result = {"ms": ms, "updates": count, "bytes": size, "rss": peak, "base": before}
        return {**result, "read": read, **meta}
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)


def _write(home: Path, workspace: Path, n: int) -> str:
    """`write_log` in a child: a forked child's peak RSS counts its parent's pages, so the
    bench itself never holds a log."""
    code = "import sys; from pathlib import Path; from bench.long_session import write_log; "
    code += "print(write_log(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(home), str(workspace), str(n)],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def run() -> str:
    base = Path(tempfile.mkdtemp(prefix="jbal", dir="/tmp"))
    rows = [
        "| events | log | row | time ms | x the same row at the smallest size | "
        "peak RSS MB (before the load) | sent |",
        "|---|---|---|---|---|---|---|",
    ]
    first: dict[str, float] = {}  # each row's time at the smallest size

    def row(n: int, size: int, label: str, r: dict[str, Any], sent: str = "") -> None:
        first.setdefault(label, r["ms"])
        rows.append(
            f"| {n:,} | {size / 1e6:.0f} MB | {label} | {r['ms']:,.0f} | "
            f"{r['ms'] / first[label]:.1f} | {r['rss']:.0f} ({r['base']:.0f}) | {sent} |"
        )

    try:
        workspace = base / "ws"
        workspace.mkdir()
        for n in SIZES:
            home = base / f"h{n}"
            sid = _write(home, workspace, n)
            size = (home / sid / "events.jsonl").stat().st_size
            measure_open("first open", home, sid)  # builds events.index
            row(n, size, "open (Session.open, fresh process)", measure_open("open", home, sid))
            plan = [("acp load, first (last 50 turns)", None), ("acp load, again", None)]
            if n <= ALL_UP_TO:
                plan.append(("acp load, whole history (JMP_ACP_LOAD_TURNS=0)", "0"))
            for label, turns in plan:
                r = load(home, workspace, sid, turns)
                sent = f"{r['updates']:,} updates, {r['bytes'] / 1e6:.2f} MB"
                sent += f"; the agent read {r['read'] / 1e6:.1f} MB"
                if r.get("omitted_records"):
                    sent += f"; records {r['from_seq']:,}-{r['records']:,} replayed"
                row(n, size, label, r, sent)
            shutil.rmtree(home, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return "\n".join(rows)


if __name__ == "__main__":
    print(run())
