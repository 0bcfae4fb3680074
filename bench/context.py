"""Context and recall benchmark: `python -m bench.context` prints the table `run()` returns.

Measures (1) building a router projection from a checkpoint at 1k, 10k and 100k events (goal:
100k within 2x of 1k; without a checkpoint, no worse than linear in events) and (2) recall
query latency over an index of about 100k pages (goal: p95 < 20 ms), with Zipf-distributed
words so that common words behave as in real logs.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kernel.context.policy import ContextPolicy, load_latest_checkpoint, write_checkpoint
from kernel.context.recall.index import RecallIndex
from protocol.codec import make_event
from protocol.events import Event, ToolFinishedData, ToolStartedData, UserData
from tests.support.context import synthetic

SIZES = (1_000, 10_000, 100_000)
TARGET_PAGES = 100_000
QUERIES = 300


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return times


def bench_projection(tmp: Path) -> list[tuple[int, float, float, float]]:
    """(events, checkpoint load ms, build ms from checkpoint, build ms without) per size."""
    policy = ContextPolicy()
    rows = []
    for size in SIZES:
        log = synthetic(size, seed=size, big_every=200, request_rate=0.0005)
        directory = tmp / f"s{size}"
        directory.mkdir()
        data, info = policy.checkpoint(log.events[:-20], "router")
        write_checkpoint(directory, data, info.through)
        load = statistics.median(_timed(lambda d=directory: load_latest_checkpoint(d), 5))
        checkpoint = load_latest_checkpoint(directory)

        def build(
            cp: object = checkpoint, events: list[Event] = log.events, read=log.read
        ) -> object:
            return policy.project(
                events, "router", reserved_bytes=3000, read_artifact=read, checkpoint=cp
            )

        warm = statistics.median(_timed(build, 15))
        cold = statistics.median(_timed(lambda: build(None), 3))
        rows.append((size, load, warm, cold))
    return rows


def zipf_corpus(rng: random.Random, words: int, vocabulary: int = 30_000) -> list[str]:
    """Words drawn with Zipf weights (rank r has weight 1/r), like natural and log text."""
    vocab = [f"w{i:x}" for i in range(vocabulary)]
    weights = [1 / (rank + 1) for rank in range(vocabulary)]
    return rng.choices(vocab, weights=weights, k=words)


def recall_events(rng: random.Random, corpus: list[str]) -> list[Event]:
    """Calls whose records and outputs give about TARGET_PAGES pages."""
    events: list[Event] = []

    def add(data: object) -> None:
        events.append(make_event("ef" * 16, len(events) + 1, 0.0, data))  # type: ignore[arg-type]

    add(UserData(text="benchmark the recall index"))
    call = 0
    while len(events) * 1.5 < TARGET_PAGES * 2:  # each call: started + finished pages
        call += 1
        start = rng.randrange(len(corpus) - 60)
        text = " ".join(corpus[start : start + rng.randint(10, 60)])
        add(ToolStartedData(call_id=f"c{call}", tool="bash", target=f"cmd {call}", request=""))
        add(ToolFinishedData(call_id=f"c{call}", tool="bash", status="ok", exit_code=0, text=text))
    return events


def bench_recall(tmp: Path) -> tuple[int, float, list[float], list[float], list[float]]:
    rng = random.Random(5)
    corpus = zipf_corpus(rng, 400_000)
    events = recall_events(rng, corpus)
    index = RecallIndex.open_or_rebuild(tmp / "memory.sqlite3")
    started = time.perf_counter()
    pages = index.sync(events, None)
    sync_s = time.perf_counter() - started
    queries = [" ".join(rng.sample(corpus, rng.randint(1, 4))) for _ in range(QUERIES)]
    intents = [" ".join(rng.sample(corpus, rng.randint(8, 20))) for _ in range(QUERIES)]
    search = [_timed(lambda q=q: index.search(q), 1)[0] for q in queries]
    relevant = [_timed(lambda q=q: index.relevant(q, len(events) - 100), 1)[0] for q in intents]
    seq = [_timed(lambda s=s: index.page(s), 1)[0] for s in range(1, QUERIES + 1)]
    index.close()
    return pages, sync_s, search, relevant, seq


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run() -> str:
    """Run both benchmarks and return a plain-text table."""
    tmp = Path(tempfile.mkdtemp(prefix="jbench"))
    try:
        projection = bench_projection(tmp)
        pages, sync_s, search, relevant, seq = bench_recall(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        "context build (router projection, read artifacts, checkpoint 20 events back)",
        f"{'events':>8} {'load ckpt ms':>13} {'build ms':>9} {'no-ckpt ms':>11}",
    ]
    for size, load, warm, cold in projection:
        lines.append(f"{size:>8,} {load:>13.2f} {warm:>9.2f} {cold:>11.1f}")
    ratio = projection[-1][2] / projection[0][2]
    lines.append(f"build at 100k / build at 1k = {ratio:.2f}x (goal <= 2x)")
    cold_ratio = projection[-1][3] / projection[0][3]
    lines.append(f"no-ckpt at 100k / no-ckpt at 1k = {cold_ratio:.0f}x (goal <= 200x: linear)")
    lines += [
        "",
        f"recall over {pages:,} pages (index built in {sync_s:.1f} s)",
        f"{'query':>10} {'p50 ms':>8} {'p95 ms':>8}",
    ]
    for name, values in (("search", search), ("relevant", relevant), ("page(seq)", seq)):
        lines.append(f"{name:>10} {_pct(values, 0.5):>8.2f} {_pct(values, 0.95):>8.2f}")
    lines.append("goal: p95 < 20 ms")
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
