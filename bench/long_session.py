"""Long sessions (issue 25): open, verify, projection, replay, ACP load and --compact at 1k, 100k
and 1M events, time and peak RSS, each in a fresh process.

The logs are written directly, line by line in the log's format (`encode_event`, seq 1..n, one
session): requests of a user record, four tool calls (started, finished) and a completed
final, about 330 bytes a record. The first open after writing has no events.index yet and
builds it with a full check: that is its own row ("first open"), the cost every open paid
before. Every other row opens with the index. Peak RSS is the process's (ru_maxrss), with what
the imports alone reach beside it; the ACP row says how many updates and bytes `session/load`
would send (it replays the whole history before its response: not paged).

    python -m bench long_session          (JMP_BENCH_LONG=1000,100000 for fewer sizes)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from protocol.codec import encode_event, make_event
from protocol.events import FinalData, SessionData, ToolFinishedData, ToolStartedData, UserData

SIZES = tuple(int(n) for n in os.environ.get("JMP_BENCH_LONG", "1000,100000,1000000").split(","))
# JMP_BENCH_OLD=ROOT: the same rows for another checkout (e.g. `git worktree add /tmp/old
# 2b9f963`), measured right after ours on the same log: "before" beside "now" in one run.
OLD = Path(os.environ["JMP_BENCH_OLD"]) if os.environ.get("JMP_BENCH_OLD") else None
OLD_OPS = ("open", "projection", "replay", "acp load", "compact")
WRITES = ("replay", "compact")  # a replay of a log this long compacts it first (AUTO_COMPACT)
ROOT = Path(__file__).resolve().parent.parent
OPS = ("first open", "open", "verify", "projection", "replay", "acp load", "compact")
# JMP_BENCH_LONG_OPS="open,verify": only these rows (a 1M replay takes minutes on 2 cores)
OPS = tuple(o for o in os.environ.get("JMP_BENCH_LONG_OPS", ",".join(OPS)).split(",") if o)


def write_log(home: Path, workspace: Path, n: int) -> str:
    """A session directory with an n-record log, as Session.create leaves one; its id."""
    sid = uuid.uuid4().hex
    directory = home / sid
    for sub in ("artifacts", "terminal"):
        (directory / sub).mkdir(parents=True)
    now = time.time()
    out = bytearray()
    seq = 1
    out += encode_event(make_event(sid, 1, now, SessionData(sid, str(workspace)))) + b"\n"
    shape = ["user"] + ["started", "finished"] * 4 + ["final"]
    while seq < n:
        for kind in shape:
            seq += 1
            if seq > n:
                break
            last = seq == n
            if last and kind != "final":
                kind = "final"  # the session ends answered: the replay row replays it
            call = f"c{seq}" if kind == "started" else f"c{seq - 1}"  # finished follows
            if kind == "user":
                data: object = UserData(text=f"request {seq}: make the tests pass")
            elif kind == "started":
                data = ToolStartedData(call_id=call, tool="bash", target="pytest -q", request="")
            elif kind == "finished":
                data = ToolFinishedData(
                    call_id=call, tool="bash", status="ok", exit_code=0, text="ok " * 60
                )
            else:
                data = FinalData(status="completed", summary=f"done with request {seq}")
            out += encode_event(make_event(sid, seq, now, data)) + b"\n"  # type: ignore[arg-type]
    (directory / "events.jsonl").write_bytes(out)
    (directory / "lock").touch()
    return sid


CHILD = r"""
import json, os, resource, sys, time
op, home, sid = sys.argv[1], sys.argv[2], sys.argv[3]
from pathlib import Path
from kernel.store.session import Session
from kernel.context.policy import ContextPolicy
from kernel.context.checkpoint import load_latest_checkpoint
from cli.main import main
from acp_server.translator import Translator
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
extra = {}
began = time.perf_counter()
if op in ("first open", "open"):
    Session.open(Path(home), sid).close()
elif op == "verify" and "verify" not in Session.open.__code__.co_varnames:
    Session.open(Path(home), sid).close()  # a checkout from before events.index: open checks all
elif op == "verify":
    Session.open(Path(home), sid, verify=True).close()
elif op == "projection":
    with Session.open(Path(home), sid) as s:
        ContextPolicy().project(
            s.events, "router", reserved_bytes=3000, read_artifact=s.artifacts.read_text,
            checkpoint=load_latest_checkpoint(s.directory),
        )
elif op == "acp load":
    with Session.open(Path(home), sid) as s:
        count = size = 0
        for update in Translator(s.workspace, s.artifacts.read_text).replay(s.events):
            count += 1
            size += len(update.model_dump_json(by_alias=True, exclude_none=True))
        extra = {"updates": count, "bytes": size}
else:
    argv = ["--session", sid, "--sessions-dir", home, "--json", "--no-mcp"]
    argv += ["--compact"] if op == "compact" else []
    saved = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    code = main(argv)
    os.dup2(saved, 1)
    extra = {"exit": code}
ms = (time.perf_counter() - began) * 1000
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"ms": ms, "rss": peak / 1024, "base": base / 1024, **extra}))
"""


def measure(op: str, home: Path, sid: str, root: Path = ROOT) -> dict[str, Any]:
    env = os.environ | {
        "PYTHONPATH": str(root),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENHANDS_SUPPRESS_BANNER": "1",
        "JMP_WARM": "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, op, str(home), sid],
        capture_output=True,
        text=True,
        cwd=str(root),
        env=env,
        timeout=3600,
    )
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["?"])[-1][:120]
        return {"ms": float("nan"), "rss": float("nan"), "base": 0.0, "error": why}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _row(n: int, size: int, op: str, label: str, r: dict[str, Any], written: float) -> str:
    note = f"log written in {written:.1f} s" if op == "first open" else ""
    if "updates" in r:
        note = f"sends {int(r['updates']):,} updates, {r['bytes'] / 1e6:.1f} MB"
    if r.get("error"):
        note = f"failed: {r['error']}"
    return (
        f"| {n:,} | {size / 1e6:.0f} MB | {op} | {label} | {r['ms']:,.0f} | "
        f"{r['rss']:.0f} ({r['base']:.0f}) | {note} |"
    )


def run() -> str:
    base = Path(tempfile.mkdtemp(prefix="jbl", dir="/tmp"))
    rows = [
        "| events | log | operation | tree | time ms | peak RSS MB (imports alone) | note |",
        "|---|---|---|---|---|---|---|",
    ]
    try:
        workspace = base / "ws"
        workspace.mkdir()
        for n in SIZES:
            home = base / f"h{n}"
            began = time.perf_counter()
            sid = write_log(home, workspace, n)
            written = time.perf_counter() - began
            size = (home / sid / "events.jsonl").stat().st_size
            for op in OPS:
                roots = [("now", ROOT)] + ([("before", OLD)] if OLD and op in OLD_OPS else [])
                for label, root in roots:
                    where = home
                    if op in WRITES:  # each tree gets the same log (index included) to change
                        where = base / f"copy-{label}"
                        shutil.copytree(home, where)
                    r = measure(op, where, sid, root)
                    rows.append(_row(n, size, op, label, r, written))
                    if where != home:
                        shutil.rmtree(where, ignore_errors=True)
            shutil.rmtree(home, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return "\n".join(rows)


if __name__ == "__main__":
    print(run())
