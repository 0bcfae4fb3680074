"""Per-step caches: incremental folds equal fresh ones, artifact texts, cheap recall syncs."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import msgspec
import pytest

from kernel.context.checkpoint import decode_checkpoint
from kernel.context.policy import ContextPolicy, FoldCache
from kernel.context.recall.index import RecallIndex
from kernel.store.artifacts import Artifacts, TextCache
from kernel.store.redact import Redactor
from protocol.events import (
    ErrorData,
    Event,
    ModelStartedData,
    RouteData,
    ToolFinishedData,
    UsageData,
)
from tests.support.context import Log, synthetic

POLICY = ContextPolicy(jev_bytes=3000, flash_bytes=9000)  # small: archiving and omission happen


def every_kind(seed: int = 7) -> Log:
    """A session with every event kind the fold knows, in an order that exercises each rule."""
    rng = random.Random(seed)
    log = Log()
    log.user("request 1: read and fix the parser ✨")
    log.add(RouteData(choice="read", confidence=0.9, context_bytes=10, probabilities={}))
    log.read_file("src/a.py", [1, 20], "def a():\n    pass\n" * 30)
    log.read_file("src/b.py", None, "b = 1\n")
    log.add(ModelStartedData(stage="generate", model="flash"))
    log.add(UsageData(provider="p", stage="generate", model="flash", seconds=0.5))
    log.call("edit", "src/a.py", "edited")  # invalidates a.py's snapshot only
    log.read_file("src/a.py", [1, 20], "def a():\n    return 1\n")
    log.call("bash", "pytest -q", "1 failed", status="error", exit_code=1)  # clears snapshots
    log.read_file("src/c.py", [5, 9], "c " * 4000)
    pending = log.start("write", "src/d.py")  # never finished
    uncertain = log.start("bash", "make deploy")
    log.uncertain(uncertain, "bash")  # clears snapshots; pinned as not acknowledged
    log.add(ErrorData(stage="route", error_class="ProviderError", message="503 " * 50))
    log.final("stopped: a call is uncertain", status="blocked")
    log.user("request 2: continue, I checked the deploy")  # a new request clears snapshots
    log.uncertain(uncertain, "bash", acknowledged=True)
    log.add(ToolFinishedData(call_id="orphan", tool="read", status="ok", text="no start recorded"))
    for i in range(40):
        tool = rng.choice(["read", "bash", "edit", "write", "mcp.search"])
        if tool == "read":
            log.read_file(f"src/m{i % 5}.py", [1, rng.randint(2, 40)], f"line {i}\n" * 50)
        else:
            log.call(tool, f"src/m{i % 5}.py", "out " * rng.choice([3, 300]))
        if i % 9 == 0:
            log.add(ErrorData(stage="tool", error_class="X", message=f"error {i}"))
    log.final("done with request 2")
    log.user("request 3: one more thing")
    assert not any(getattr(e.data, "call_id", "") == pending for e in log.events[-60:])
    return log


def encoded(state: object) -> bytes:
    return msgspec.json.encode(state)


@pytest.mark.parametrize("seed", [7, 8])
def test_incremental_fold_equals_a_fresh_fold_after_every_event(seed: int) -> None:
    log = every_kind(seed)
    cache, growing = FoldCache(), []
    for event in log.events:
        growing.append(event)
        state = cache.state(growing, None, POLICY.max_snapshots)
        assert encoded(state) == encoded(POLICY.state(growing)), f"differs at #{event.seq}"
        for audience in ("router", "generator"):
            with_cache = POLICY.project(
                growing, audience, reserved_bytes=50, read_artifact=log.read, cache=cache
            )
            fresh = POLICY.project(growing, audience, reserved_bytes=50, read_artifact=log.read)
            assert with_cache == fresh
        assert encoded(state) == encoded(POLICY.state(growing))  # projecting did not change it
    assert cache.refolds == 1
    text = POLICY.project(growing, "generator", reserved_bytes=0, cache=cache).text
    assert "UNCERTAIN" not in text and "request 3" in text  # acknowledged, then a new request


def test_a_checkpoint_becomes_the_base_once_the_log_reaches_it() -> None:
    log = every_kind()
    data, info = POLICY.checkpoint(log.events[:30], "router")
    checkpoint = decode_checkpoint(data)
    assert info.through == 30
    cache, growing = FoldCache(), []
    for event in log.events:
        growing.append(event)
        state = cache.state(growing, checkpoint, POLICY.max_snapshots)
        assert encoded(state) == encoded(POLICY.state(growing, checkpoint))
    assert cache.refolds == 2  # from scratch before seq 30, from the checkpoint at 30
    assert encoded(checkpoint) == encoded(decode_checkpoint(data))  # its state was copied


def test_a_replaced_shorter_or_foreign_log_is_folded_afresh() -> None:
    log = synthetic(400, seed=5)
    cache = FoldCache()
    cache.state(log.events[:300], None, POLICY.max_snapshots)
    reopened = [msgspec.json.decode(msgspec.json.encode(e), type=Event) for e in log.events]
    other = synthetic(400, seed=6)
    for events in (reopened, log.events[:200], other.events, log.events):
        state = cache.state(events, None, POLICY.max_snapshots)
        assert encoded(state) == encoded(POLICY.state(events))
    assert cache.refolds == 5
    log.events[-1] = other.events[-1]  # same length, different last record: not a prefix
    assert encoded(cache.state(log.events, None, 6)) == encoded(POLICY.state(log.events))


def test_a_changed_snapshot_limit_refolds() -> None:
    log = every_kind()
    cache = FoldCache()
    cache.state(log.events, None, 6)
    assert len(cache.state(log.events, None, 1).snapshots) <= 1
    assert cache.refolds == 2


def test_an_emptied_output_artifact_falls_back_to_the_preview() -> None:
    log = Log()
    log.user("run it")
    log.call("bash", "make", "BUILD OK 42")
    log.artifacts["artifacts/c1-output.txt"] = ""  # not fsynced, then a power loss
    text = POLICY.project(log.events, "generator", reserved_bytes=0, read_artifact=log.read).text
    assert "BUILD OK 42" in text and "[full output artifact is empty]" in text


# --- artifacts ---------------------------------------------------------------------


@pytest.fixture
def artifacts(short_tmp: Path) -> Artifacts:
    session = short_tmp / "s"
    (session / "artifacts").mkdir(parents=True)
    (session / "events.jsonl").write_text("{}\n")
    return Artifacts(session, Redactor(["cache-secret-1"]))


def test_a_standalone_artifact_is_fsynced_with_its_directory(
    artifacts: Artifacts, monkeypatch
) -> None:
    """Without a session's commit an artifact is durable when written: its data, then its
    name (the directory); in a session the commit does both (tests/test_durable.py)."""
    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: (synced.append("dir" if _is_dir(fd) else "file"), real(fd))
    )
    saved = artifacts.write_json("r.json", {"a": 1})
    kept = artifacts.write_text("out.txt", "two")
    assert synced == ["file", "dir", "file", "dir"]
    assert artifacts.read_json(saved) == {"a": 1}
    assert (artifacts.root / kept).read_text() == "two"
    assert sorted(p.name for p in artifacts.directory.iterdir()) == [
        "out.txt",
        "r.json",
    ]  # still atomic: no temporary file is left


def _is_dir(fd: int) -> bool:
    import stat

    return stat.S_ISDIR(os.fstat(fd).st_mode)


def test_cached_texts_equal_what_a_fresh_reader_sees(artifacts: Artifacts) -> None:
    odd = "crlf\r\nlone\rcache-secret-1 ünï 🚀 \udcff\udcfe end"
    rel = artifacts.write_text("odd.txt", odd)
    fresh = Artifacts(artifacts.root, artifacts.redactor)
    text = artifacts.read_text(rel)
    assert text == fresh.read_text(rel)  # from memory (the write) and from disk
    # lone surrogates (undecodable bytes) are written escaped, as names are (issue 9 item 9)
    assert "[REDACTED]" in text and "\r" not in text and "\\xff\\xfe" in text
    os.unlink(artifacts.root / rel)
    assert artifacts.read_text(rel) == text  # it was the cached copy that was compared


def test_reads_are_cached_only_for_plain_artifact_files(artifacts: Artifacts) -> None:
    rel = artifacts.write_text("a.txt", "inside")
    fresh = Artifacts(artifacts.root, artifacts.redactor)
    assert fresh.read_text(rel) == "inside"
    os.unlink(artifacts.root / rel)
    assert fresh.read_text(rel) == "inside"  # artifacts are never replaced: served from memory
    log = artifacts.root / "events.jsonl"
    (artifacts.directory / "link.txt").symlink_to(log)
    assert fresh.read_text("events.jsonl") == fresh.read_text("artifacts/link.txt") == "{}\n"
    log.write_text("{}\n{}\n")
    assert fresh.read_text("events.jsonl") == fresh.read_text("artifacts/link.txt") == "{}\n{}\n"


def test_the_text_cache_is_bounded() -> None:
    cache = TextCache(limit=10, entry_limit=6)
    cache.put("a", "aaaa")
    cache.put("b", "bbbb")
    cache.put("big", "x" * 7)  # above the entry limit: never kept
    assert cache.get("a") == "aaaa"  # a is now the most recently used
    cache.put("c", "cccc")  # 12 > 10: the least recently used (b) goes
    assert (cache.get("a"), cache.get("b"), cache.get("c"), cache.get("big")) == (
        "aaaa",
        None,
        "cccc",
        None,
    )
    assert cache.size == 8


# --- recall sync -------------------------------------------------------------------


class Counting:
    """A connection stand-in that records each statement the index hands to SQLite."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.seen: list[str] = []

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        self.seen.append(sql)
        return self.db.execute(sql, *args)  # type: ignore[arg-type]

    def executemany(self, sql: str, rows: object) -> sqlite3.Cursor:
        self.seen.append(sql)
        return self.db.executemany(sql, rows)  # type: ignore[arg-type]

    def close(self) -> None:
        self.db.close()


def statements(index: RecallIndex) -> list[str]:
    assert index._db is not None
    counting = Counting(index._db)
    index._db = counting  # type: ignore[assignment]
    return counting.seen


def dump(path: Path) -> tuple[list[object], list[object]]:
    db = sqlite3.connect(path)
    try:
        pages = db.execute("SELECT * FROM pages ORDER BY id").fetchall()
        terms = db.execute("SELECT * FROM terms ORDER BY term").fetchall()
        hits = db.execute("SELECT rowid FROM pages_fts WHERE pages_fts MATCH 'alpha'").fetchall()
        return pages + hits, terms
    finally:
        db.close()


def test_syncing_event_by_event_equals_one_sync(short_tmp: Path) -> None:
    log = synthetic(300, seed=2)
    one = RecallIndex.open_or_rebuild(short_tmp / "one.sqlite3")
    many = RecallIndex.open_or_rebuild(short_tmp / "many.sqlite3")
    one.sync(log.events, log.read)
    for n in range(1, len(log.events) + 1):
        many.sync(log.events[:n], log.read)
    one.close(), many.close()
    assert dump(short_tmp / "one.sqlite3") == dump(short_tmp / "many.sqlite3")
    assert dump(short_tmp / "one.sqlite3")[0]


def test_a_sync_with_nothing_indexable_runs_no_sql(short_tmp: Path) -> None:
    log = Log()
    log.user("find the HERON")
    index = RecallIndex.open_or_rebuild(short_tmp / "m.sqlite3")
    index.sync(log.events, log.read)
    seen = statements(index)
    log.add(RouteData(choice="read", confidence=0.9, context_bytes=10, probabilities={}))
    log.add(ModelStartedData(stage="generate", model="flash"))
    assert index.sync(log.events, log.read) == 0 and seen == []
    log.call("read", "src/heron.py", "HERON lives here")
    assert index.sync(log.events, log.read) == 3
    assert len(seen) <= 10, seen
    index.close()
    # The file's `through` lagged behind the skipped records: redoing them adds nothing.
    log.add(RouteData(choice="bash", confidence=0.9, context_bytes=10, probabilities={}))
    assert index.sync(log.events, log.read) == 0
    again = RecallIndex.open_or_rebuild(short_tmp / "m.sqlite3")
    assert again.sync(log.events, log.read) == 0
    assert [p.kind for p in again.search("heron")].count("tool_output") == 1
    again.close()


def test_a_shorter_log_after_a_skipped_sync_still_rebuilds(short_tmp: Path) -> None:
    log = synthetic(100, seed=4)
    index = RecallIndex.open_or_rebuild(short_tmp / "m.sqlite3")
    index.sync(log.events, log.read)
    assert index.sync(log.events, log.read) == 0
    short = Log()
    short.user("fresh OSPREY start")
    assert index.sync(short.events, short.read) == 1
    assert [p.seq for p in index.search("osprey")] == [1] and index.search("alpha") == []
    index.close()


def test_relevant_answers_are_reused_only_until_new_pages_arrive(short_tmp: Path) -> None:
    log = Log()
    log.user("where does the HERON nest")
    log.call("bash", "grep heron", "the heron nests in zone one", exit_code=0)
    index = RecallIndex.open_or_rebuild(short_tmp / "m.sqlite3")
    index.sync(log.events, log.read)
    first = index.relevant("heron nest", exclude_through=100, limit=5)
    assert {p.seq for p in first} == {2, 3}  # started and finished
    seen = statements(index)
    assert index.relevant("heron nest", exclude_through=100, limit=5) == first and seen == []
    assert index.relevant("heron nest", exclude_through=2, limit=5) == [] and seen
    log.add(RouteData(choice="bash", confidence=0.9, context_bytes=10, probabilities={}))
    index.sync(log.events, log.read)  # nothing indexable: the answers stay
    seen.clear()
    assert index.relevant("heron nest", exclude_through=100, limit=5) == first and seen == []
    log.call("bash", "grep heron again", "another heron nest in zone two", exit_code=0)
    index.sync(log.events, log.read)
    again = index.relevant("heron nest", exclude_through=100, limit=5)
    assert {p.seq for p in again} == {2, 3, 5, 6}
    index.close()
