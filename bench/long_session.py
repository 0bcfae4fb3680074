"""Long sessions (issue 25): open, verify, projection, replay, ACP load and --compact at 1k, 100k
and 1M events, time and peak RSS, each in a fresh process.

The logs are written directly (`write_log`: the log's lines, its events.index and its latest
checkpoint, as a session that ran that long leaves them; 150 requests, runs of route /
tool_started / tool_finished, a compaction at each run's end), and cached under
/tmp/jmp-bench-long/ keyed by the generator's version and the code that shapes the bytes, so a
second `make bench` does not write 375 MB again. Rows:

- first open: a copy of the log without its index, rebuilt by a full check (the cost every
  open paid before the index; the note says whether it came out byte-identical to the one
  written beside the log);
- open; verify (`--verify`: every line); projection (the router's, the first request's after
  open: from the latest checkpoint, without the recall cache, which a real session keeps up to
  date); replay (`jmp --json --session ID`, no prompt: the saved answer); acp load (what
  `session/load` sends: its last turns, acp_server/history.py); compact (`--compact`, on a copy).

Open and replay also run on two other record patterns (issue 33): "pairs" (bare tool_started /
tool_finished pairs, a call open across every index entry) and "random" (calls in a random
order, at most three open at once). Each row's time is also given as a multiple of the same
row at the smallest size, measured in the same run.

Peak RSS is the process's (VmHWM), with what the imports alone reach beside it.

    python -m bench long_session          (JMP_BENCH_LONG=1000,100000 for fewer sizes;
                                           JMP_BENCH_LONG_PATTERNS=pairs,random for fewer;
                                           JMP_BENCH_LONG_REPEAT=3: each row's median of 3)
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
from protocol.events import (
    CompactionData,
    Event,
    FinalData,
    RouteData,
    RunStartedData,
    SessionData,
    ToolFinishedData,
    ToolStartedData,
    UserData,
)

SIZES = tuple(int(n) for n in os.environ.get("JMP_BENCH_LONG", "1000,100000,1000000").split(","))
# JMP_BENCH_OLD=ROOT: the same rows for another checkout (e.g. `git worktree add /tmp/old
# 2b9f963`), measured right after ours on the same log: "before" beside "now" in one run.
OLD = Path(os.environ["JMP_BENCH_OLD"]) if os.environ.get("JMP_BENCH_OLD") else None
OLD_OPS = ("open", "projection", "replay", "acp load", "compact")
WRITES = ("first open", "compact")  # on a copy: the cached log stays as written
ROOT = Path(__file__).resolve().parent.parent
OPS = ("first open", "open", "verify", "projection", "replay", "acp load", "compact")
# JMP_BENCH_LONG_OPS="open,verify": only these rows
OPS = tuple(o for o in os.environ.get("JMP_BENCH_LONG_OPS", ",".join(OPS)).split(",") if o)
# The record patterns (write_log): the agent's rhythm, and for open and replay bare call pairs
# straddling every index entry and random calls (issue 33). JMP_BENCH_LONG_PATTERNS=agent: one.
PATTERNS = tuple(
    p for p in os.environ.get("JMP_BENCH_LONG_PATTERNS", "agent,pairs,random").split(",") if p
)
PATTERN_OPS = ("open", "replay")
REPEAT = int(os.environ.get("JMP_BENCH_LONG_REPEAT", "1"))  # runs per row: the median is shown


GENERATOR = 2  # the shape written below (cached logs under /tmp are keyed by it)
REQUESTS = 150  # a long session's requests: all pinned verbatim, so admission caps them
OUT = "ok " * 60  # a test run's output preview
COMPACT_EVERY = 2000  # a run's end compacts when this many records came since (AUTO_COMPACT)


def write_log(home: Path, workspace: Path, n: int, pattern: str = "agent") -> str:
    """A session directory with an n-record log and its events.index, as a session that ran
    that long leaves them; its id.

    Written line by line in the log's format (`encode_event`, seq 1..n, one session): up to
    REQUESTS requests (user, run_started, then route / tool_started / tool_finished per call,
    and a completed final), the runs long enough to reach n; after a run's final, when
    COMPACT_EVERY records came since the last, the two `compaction` records a real run's end
    writes (kernel/loop/agent.py), and the latest checkpoint file (folded as compact folds:
    from the previous checkpoint). The last run ends completed, compacted, at record n. The
    index is written as the kernel writes it (digests chained over the lines, settled marks
    kept by pending.Settling); the "first open" row rebuilds it by a full check and says
    whether the kernel's own index came out byte-identical.

    `pattern` "pairs" (issue 33): one request whose run is bare tool_started / tool_finished
    pairs with a tool_started at every stride-th record, so that a call is open across every
    index entry and none is settled, then a completed final; "random": calls in a random order,
    at most three open at once, ended by their end or by an uncertainty record and its
    acknowledgement, bash and edits mixed, a completed final after the last has ended."""
    from kernel.context.checkpoint import encode_checkpoint
    from kernel.context.render import archive_calls
    from kernel.context.state import State, call_index, fold
    from kernel.store import log_index
    from kernel.store.log_index import Chainer, IndexWriter, kind_bits, mark
    from kernel.store.pending import Settling

    sid = uuid.uuid4().hex
    directory = home / sid
    for sub in ("artifacts", "terminal"):
        (directory / sub).mkdir(parents=True)
    now = time.time()
    stride, entries, chainer, settling = log_index.STRIDE, [], Chainer(), Settling()
    state, calls, offset, seq, since = State(), call_index(State()), 0, 0, 0
    checkpoint: tuple[bytes, int] | None = None
    per_run = max(10, n // REQUESTS)
    chunk: list[bytes] = []  # the lines since the last entry: hashed once per entry
    kinds = 0  # the chunk's summary
    run: list[Event] = []  # the records since the last fold: folded once per compaction

    def put(data: object) -> Event:
        nonlocal offset, seq, since, kinds
        seq, since = seq + 1, since + 1
        event = make_event(sid, seq, now + seq * 0.001, data)  # type: ignore[arg-type]
        line = encode_event(event) + b"\n"
        chunk.append(line)
        offset += len(line)
        settling.add(event)
        kinds |= kind_bits((event.kind,))
        run.append(event)
        if seq % stride == 0:
            block = b"".join(chunk)
            log.write(block)
            chainer.update(block)
            entries.append(mark(seq, offset, chainer.close(), settling.resume(), kinds))
            chunk.clear()
            kinds = 0
        return event

    with (directory / "events.jsonl").open("wb") as log:
        put(SessionData(sid, str(workspace)))
        request = 0
        if pattern != "agent":
            put(UserData(text="request 1: make the tests pass"))
            put(RunStartedData(model="flash", router_model="jev", workspace=str(workspace)))
            calls_of(pattern, n - 1 - seq, put)
            put(FinalData(status="completed", summary="done with request 1"))
        while seq < n:
            request += 1
            left = n - seq
            size = left if left < 2 * per_run else per_run  # the last run takes the rest
            compacts = size == left or since + size >= COMPACT_EVERY
            body = size - 3 - (2 if compacts else 0)  # user, run_started, final; compaction
            put(UserData(text=f"request {request}: make the tests pass in module {request % 17}"))
            put(RunStartedData(model="flash", router_model="jev", workspace=str(workspace)))
            for k in range(body // 3):
                call = f"{request:04x}{k:012x}"
                put(RouteData("bash", 0.93, 4096, {"bash": 0.93, "done": 0.07}, ["bash", "done"]))
                put(ToolStartedData(call_id=call, tool="bash", target="pytest -q", request=""))
                put(ToolFinishedData(call_id=call, tool="bash", status="ok", exit_code=0, text=OUT))
            for _ in range(body % 3):  # a route to done, and its review's second route
                put(RouteData("done", 0.8, 4096, {"bash": 0.2, "done": 0.8}, ["bash", "done"]))
            final = put(FinalData(status="completed", summary=f"done with request {request}"))
            if compacts:
                fold(state, run, index=calls)
                run.clear()
                archive_calls(state, 4)  # what compact() folds from its previous checkpoint
                through = final.seq or 0
                if seq >= n - 2:  # only the newest file is ever read (load_latest_checkpoint)
                    checkpoint = (encode_checkpoint(state, record_digest_of(final)), through)
                for audience in ("router", "generator"):
                    name = f"context-{through}.json"
                    put(CompactionData(audience=audience, through=through, checkpoint=name))
                calls.clear()
                calls.update(call_index(state))
                since = 0
        log.write(b"".join(chunk))
    if checkpoint is not None:
        (directory / f"context-{checkpoint[1]}.json").write_bytes(checkpoint[0])
    IndexWriter(directory, sid, stride, None).write(entries)
    (directory / "lock").touch()
    return sid


def calls_of(pattern: str, n: int, put: Any) -> None:
    """`n` records of tool calls in `pattern` ("pairs" or "random"), every call ended."""
    import random

    from protocol.events import ToolUncertainData

    def start(call: str, tool: str = "bash") -> None:
        put(ToolStartedData(call_id=call, tool=tool, target="pytest -q", request=""))

    def end(call: str, code: int = 0) -> None:
        put(ToolFinishedData(call_id=call, tool="bash", status="ok", exit_code=code, text=OUT))

    def route() -> None:
        put(RouteData("bash", 0.93, 4096, {"bash": 0.93, "done": 0.07}, ["bash", "done"]))

    done = 0
    if pattern == "pairs":  # from record 4: a tool_started at every even seq, the stride's too
        for k in range(n // 2):
            start(f"p{k:012x}")
            end(f"p{k:012x}")
        if n % 2:
            route()
        return
    rng = random.Random(33)
    live: list[str] = []
    count = 0
    while done + len(live) + 2 <= n:
        roll = rng.random()
        if roll < 0.35 and len(live) < 3:
            count += 1
            live.append(f"r{count:012x}")
            start(live[-1], rng.choice(["bash", "bash", "str_replace_editor"]))
        elif roll < 0.75 and live:
            end(live.pop(rng.randrange(len(live))), rng.choice([0, 0, 1, -1]))
        elif live:
            call = live.pop(rng.randrange(len(live)))
            for ack in (False, True):
                put(ToolUncertainData(call, "bash", "kernel_exit", note="", acknowledged=ack))
            done += 1
        else:
            route()
        done += 1
    for call in live:
        end(call)
    for _ in range(n - done - len(live)):
        route()


def record_digest_of(event: Event) -> str:
    """kernel.store.event_log.record_digest of this one record."""
    import hashlib

    return hashlib.sha256(encode_event(event)).hexdigest()[:32]


CHILD = r"""
import json, os, sys, time
op, home, sid = sys.argv[1], sys.argv[2], sys.argv[3]
from pathlib import Path
from kernel.store.session import Session
from kernel.context.policy import ContextPolicy
from kernel.context.checkpoint import load_latest_checkpoint
from cli.main import main
try:
    from acp_server.translator import Translator
except ImportError:  # an older checkout
    from acp_server.updates import Translator
def peak():  # VmHWM, in KB: ru_maxrss would keep the forking parent's peak across exec
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
base = peak()
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
        events = s.events
        try:  # what session/load replays now: the last turns (acp_server/history.py)
            from acp_server.history import Tail, load_turns, window
            shown = window(events, load_turns())
            events = Tail(events, shown.start, shown.end)
        except ImportError:  # an older checkout: the whole history
            pass
        for update in Translator(s.workspace, s.artifacts.read_text).replay(events):
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
peak = peak()
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


def _row(n: int, size: int, op: str, label: str, r: dict[str, Any], ratio: float) -> str:
    note = str(r.get("note", ""))
    if "updates" in r:
        note = f"sends {int(r['updates']):,} updates, {r['bytes'] / 1e6:.1f} MB"
    if r.get("error"):
        note = f"failed: {r['error']}"
    return (
        f"| {n:,} | {size / 1e6:.0f} MB | {op} | {label} | {r['ms']:,.0f} | {ratio:.1f} | "
        f"{r['rss']:.0f} ({r['base']:.0f}) | {note} |"
    )


CACHE = Path(os.environ.get("JMP_BENCH_LONG_CACHE", "/tmp/jmp-bench-long"))  # logs kept
SHAPED_BY = (  # the code whose change changes the bytes written (and write_log's own source)
    "protocol/events.py",
    "protocol/codec.py",
    "kernel/store/log_index.py",
    "kernel/store/pending.py",
    "kernel/context/state.py",
    "kernel/context/render.py",
    "kernel/context/checkpoint.py",
)


def cached_log(n: int, pattern: str = "agent") -> tuple[Path, str, float]:
    """(home, session id, seconds it took to write) of an n-record log of `pattern`, written
    once per version of the code that shapes it; built under a temporary name, renamed when
    whole."""
    import hashlib
    import inspect

    key = hashlib.sha256(f"{GENERATOR} {REQUESTS} {COMPACT_EVERY} {OUT}".encode())
    key.update(inspect.getsource(write_log).encode() + inspect.getsource(calls_of).encode())
    for name in SHAPED_BY:
        key.update((ROOT / name).read_bytes())
    tag = "" if pattern == "agent" else f"{pattern}-"
    home = CACHE / f"{key.hexdigest()[:12]}-{tag}{n}"
    done = home / "written"
    if done.exists():
        sid, seconds = done.read_text().split()
        return home, sid, float(seconds)
    CACHE.mkdir(exist_ok=True)
    for stale in CACHE.glob(f"*-{tag}{n}"):  # another version's log of this size: 375 MB at 1M
        if not tag and not stale.name.split("-")[1].isdigit():
            continue  # a pattern's log
        shutil.rmtree(stale, ignore_errors=True)
    building = Path(tempfile.mkdtemp(prefix=f".{n}-", dir=CACHE))
    began = time.perf_counter()
    (building / "ws").mkdir()
    sid = write_log(building / "sessions", home / "ws", n, pattern)
    seconds = time.perf_counter() - began
    (building / "written").write_text(f"{sid} {seconds:.1f}")
    try:
        building.rename(home)
    except OSError:  # another run built it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return home, sid, seconds


def run() -> str:
    base = Path(tempfile.mkdtemp(prefix="jbl", dir="/tmp"))
    rows = [
        "| events | log | operation | tree | time ms | x at the smallest size | "
        "peak RSS MB (imports alone) | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    smallest: dict[str, float] = {}
    try:
        for n, pattern in ((n, p) for n in SIZES for p in PATTERNS):
            cache, sid, written = cached_log(n, pattern)
            home = cache / "sessions"
            log = home / sid / "events.jsonl"
            size = log.stat().st_size
            for op in OPS if pattern == "agent" else [o for o in OPS if o in PATTERN_OPS]:
                roots = [("now", ROOT)] + ([("before", OLD)] if OLD and op in OLD_OPS else [])
                for label, root in roots:
                    where = home
                    if op in WRITES or label == "before":  # the cached log is never changed
                        where = base / f"copy-{label}"
                        shutil.copytree(home, where)
                        if op == "first open":
                            (where / sid / "events.index").unlink(missing_ok=True)
                    r = measure(op, where, sid, root)
                    if op not in WRITES and label == "now" and REPEAT > 1:
                        runs = sorted(
                            [r, *(measure(op, where, sid, root) for _ in range(1, REPEAT))],
                            key=lambda x: x["ms"],
                        )
                        r = runs[len(runs) // 2]
                    if op == "first open" and label == "now" and not r.get("error"):
                        built, kept = where / sid / "events.index", home / sid / "events.index"
                        same = built.read_bytes() == kept.read_bytes() if kept.exists() else None
                        r["note"] = (
                            f"log written in {written:.1f} s; rebuilt index "
                            + {True: "byte-identical", False: "DIFFERS", None: "(none)"}[same]
                        )
                    name = op if pattern == "agent" else f"{op} ({pattern})"
                    first = smallest.setdefault(f"{name} {label}", r["ms"])
                    rows.append(_row(n, size, name, label, r, r["ms"] / first))
                    if where != home:
                        shutil.rmtree(where, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return "\n".join(rows)


if __name__ == "__main__":
    print(run())
