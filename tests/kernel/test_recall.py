"""Recall index: incremental FTS5 sync, odd queries, needles in big sessions, damage, the tool."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from kernel.context.recall.index import RecallIndex
from kernel.context.recall.pages import split_pages
from kernel.context.recall.search import RecallError, fts_query, query_terms
from kernel.context.recall.tool import RECALL_SCHEMA, run_recall
from tests.support.context import Log, synthetic


@pytest.fixture
def index(short_tmp: Path):  # type: ignore[no-untyped-def]
    idx = RecallIndex.open_or_rebuild(short_tmp / "memory.sqlite3")
    yield idx
    idx.close()


def test_pages_overlap_and_cover_the_text() -> None:
    text = "".join(chr(0x4E00 + i % 500) for i in range(5000))
    pages = split_pages(text, 2048, 256)
    assert all(len(p) <= 2048 for p in pages)
    assert pages[1][:256] == pages[0][-256:]
    assert pages[0] + "".join(p[256:] for p in pages[1:]) == text
    assert split_pages("") == [] and split_pages("short") == ["short"]


@pytest.mark.parametrize(
    "query", ['"', "AND OR NOT", "NEAR(a b)", "a* ^b", "col:x", "'; DROP TABLE pages; --", "", "🚀"]
)
def test_odd_queries_never_raise(index: RecallIndex, query: str) -> None:
    log = synthetic(50, seed=1)
    index.sync(log.events, log.read)
    assert isinstance(index.search(query), list)
    assert isinstance(index.relevant(query), list)
    assert fts_query(query_terms('say "hi" AND bye')) == '"say" AND "hi" AND "and" AND "bye"'


def test_needle_from_event_10_in_a_50000_event_session(index: RecallIndex) -> None:
    log = Log()
    log.user("start")
    for _ in range(3):
        log.call("read", "README", "readme text")
    log.final("looked around")
    log.call("bash", "grep -r secret_door", "found QUOKKA_NEEDLE_77 in config/doors.yml")
    assert [e.seq for e in log.events[8:]] == [9, 10]
    other = synthetic(50_000, seed=3)
    log.events.extend(other.events[: 50_000 - len(log.events)])
    for seq, event in enumerate(log.events, start=1):
        event.seq = seq
    log.artifacts.update(other.artifacts)
    assert index.sync(log.events, log.read) > 0
    found = index.search("quokka_needle_77")
    assert found and found[0].seq in (9, 10)
    assert found[0].provenance == "historical effect" and found[0].tool == "bash"
    assert "QUOKKA_NEEDLE_77" in run_recall(index, {"query": "QUOKKA_NEEDLE_77 doors"})
    assert index.relevant("where is the quokka_needle_77 door", exclude_through=5) == []
    assert index.relevant("where is the quokka_needle_77 door", exclude_through=100)


def test_sync_is_incremental_and_one_transaction(index: RecallIndex) -> None:
    log = Log()
    log.user("first PELICAN request")
    assert index.sync(log.events, log.read) == 1
    assert index.sync(log.events, log.read) == 0  # nothing new
    log.call("read", "src/app.py", "def PELICAN(): pass")
    added = index.sync(log.events, log.read)
    assert added >= 3  # started, finished, output
    pages = index.search("pelican")
    kinds = {(p.kind, p.provenance) for p in pages}
    assert ("user", "user instruction") in kinds
    assert ("tool_output", "historical effect") in kinds
    assert all(p.target == "src/app.py" for p in pages if p.kind.startswith("tool"))


def test_provenance_of_answers_and_paging_by_seq(index: RecallIndex) -> None:
    log = Log()
    log.user("question")
    log.final("The answer is HERON")
    index.sync(log.events, log.read)
    (page,) = index.page(2)
    assert page.provenance == "assistant conversation" and "HERON" in page.text
    text = run_recall(index, {"seq": 2})
    assert "assistant conversation" in text and "HERON" in text
    assert "nothing found" in run_recall(index, {"seq": 999})


def test_long_outputs_are_paged(index: RecallIndex) -> None:
    log = Log()
    log.user("u")
    log.call("bash", "cat big", "x " * 5000 + "TAILWORD")
    index.sync(log.events, log.read)
    pages = [p for p in index.page(3) if p.kind == "tool_output"]
    assert len(pages) >= 5 and "TAILWORD" in pages[-1].text
    assert [p.part for p in index.page(3)] == sorted(p.part for p in index.page(3))


def test_foreign_session_or_shorter_log_rebuilds(index: RecallIndex) -> None:
    log = synthetic(100, seed=4)
    index.sync(log.events, log.read)
    short = Log()
    short.user("fresh OSPREY start")
    assert index.sync(short.events, short.read) >= 1  # through > last seq: rebuilt
    assert [p.seq for p in index.search("osprey")] == [1]
    assert index.search("alpha") == []


def test_corrupt_file_is_rebuilt_on_open(short_tmp: Path) -> None:
    path = short_tmp / "memory.sqlite3"
    path.write_bytes(b"\x00garbage" * 512)
    index = RecallIndex.open_or_rebuild(path)
    log = Log()
    log.user("IBIS")
    assert index.sync(log.events, log.read) == 1 and index.search("ibis")
    index.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_deleted_file_is_recreated_on_next_sync(index: RecallIndex) -> None:
    log = Log()
    log.user("KESTREL")
    index.sync(log.events, log.read)
    os.unlink(index.path)
    log.user("second")
    assert index.sync(log.events, log.read) == 2  # everything again, into a new file
    assert index.path.exists() and index.search("kestrel")


def test_unusable_location_is_skipped_for_context_but_an_error_for_the_tool(
    short_tmp: Path,
) -> None:
    blocker = short_tmp / "file"
    blocker.write_text("not a directory")
    index = RecallIndex.open_or_rebuild(blocker / "memory.sqlite3")
    log = Log()
    log.user("x")
    assert index.sync(log.events, log.read) == 0
    assert index.relevant("x") == []
    with pytest.raises(RecallError, match="unavailable"):
        run_recall(index, {"query": "x"})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "needs `query`"),
        ({"query": ""}, "non-empty"),
        ({"seq": 0}, "positive integer"),
        ({"seq": True}, "positive integer"),
        ({"seq": "3"}, "positive integer"),
        ({"query": "a", "path": "x"}, "does not take path"),
        ([], "takes an object"),
    ],
)
def test_bad_recall_arguments_raise_clear_errors(
    index: RecallIndex, arguments: object, message: str
) -> None:
    with pytest.raises(RecallError, match=message):
        run_recall(index, arguments)  # type: ignore[arg-type]


def test_schema_is_closed_with_optional_query_and_seq() -> None:
    assert RECALL_SCHEMA["type"] == "object"
    assert RECALL_SCHEMA["additionalProperties"] is False
    assert RECALL_SCHEMA["properties"]["query"]["type"] == "string"
    assert RECALL_SCHEMA["properties"]["seq"]["type"] == "integer"
    assert "required" not in RECALL_SCHEMA


def test_recall_answers_through_the_tool_handle_interface(index: RecallIndex) -> None:
    """The step calls recall like a worker tool: specs, validate (WorkerFailed), run."""
    from kernel.loop.kernel_tools import kernel_tools
    from kernel.supervision.supervisor import WorkerFailed

    log = Log()
    log.user("find the kestrel")
    log.call("bash", "ls", "kestrel.txt")
    index.sync(log.events, log.read)
    handle = kernel_tools(lambda: index)["recall"]
    (spec,) = handle.specs()
    assert spec.name == "recall" and spec.parameters == RECALL_SCHEMA
    with pytest.raises(WorkerFailed) as bad:
        handle.validate("recall", {"query": "a", "path": "x"})
    assert bad.value.code == "invalid_arguments" and "does not take path" in bad.value.detail
    checked = handle.validate("recall", {"seq": 2, "query": "kestrel"})
    assert checked.target == '{"query": "kestrel", "seq": 2}'
    found = handle.run("c1", "recall", checked.arguments)
    assert found.status == "ok" and "kestrel.txt" in found.text and found.reply_to == "c1"
    gone = kernel_tools(lambda: None)["recall"].run("c2", "recall", {"query": "x"})
    assert gone.status == "error" and gone.error == gone.text == "the recall cache is unavailable"
