"""Context policy: budgets, pinned intent, archival, omission, snapshots, checkpoints, recall."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.context.compact import compact
from kernel.context.policy import (
    ContextPolicy,
    load_latest_checkpoint,
    write_checkpoint,
)
from kernel.context.recall.index import RecallIndex
from kernel.context.render import cut_head, cut_tail, excerpt, nbytes
from kernel.context.state import (
    Call,
    State,
    fold,
    invalidate_for_action,
    invalidate_for_request,
    invalidate_for_uncertain,
    remember_read,
)
from kernel.errors import ConfigError, ContextOverflow
from kernel.loop.context_view import ContextView
from protocol.events import ErrorData, FinalData, ToolUncertainData, UserData
from tests.support.context import Log, synthetic

POLICY = ContextPolicy()


def requests_of(log: Log) -> list[str]:
    return [e.data.text for e in log.events if isinstance(e.data, UserData)]


def assert_projection(log: Log, audience: str, reserved: int, **kw: object) -> str | None:
    """Within budget and every request verbatim, or ContextOverflow. Returns the text."""
    try:
        projection = POLICY.project(
            log.events, audience, reserved_bytes=reserved, read_artifact=log.read, **kw
        )
    except ContextOverflow:
        pinned = sum(nbytes(t) for t in requests_of(log))
        assert pinned > POLICY.budget(audience) - reserved - 2000  # overflow only when it's true
        return None
    assert projection.bytes == len(projection.text.encode("utf-8"))
    assert projection.bytes <= POLICY.budget(audience) - reserved
    for text in requests_of(log):
        assert text in projection.text
    return projection.text


# --- budgets -------------------------------------------------------------------------


@pytest.mark.parametrize("n_events", [10, 100, 1000, 10_000])
@pytest.mark.parametrize("audience", ["router", "generator"])
def test_budget_holds_and_requests_survive(n_events: int, audience: str) -> None:
    log = synthetic(n_events, seed=n_events, big_every=40, request_rate=0.004)
    text = assert_projection(log, audience, reserved=3000)
    assert text is not None
    label = "ROUTER PROJECTION (smaller" if audience == "router" else "GENERATOR PROJECTION"
    assert text.startswith(label)


@pytest.mark.slow
def test_budget_holds_at_100k_events() -> None:
    """(Build time against log size is measured by bench/context.py, not asserted here.)"""
    log = synthetic(100_000, seed=7, big_every=200, request_rate=0.0005)
    for audience in ("router", "generator"):
        assert assert_projection(log, audience, reserved=2500) is not None


def test_single_output_larger_than_the_budget_is_cut_with_a_marker() -> None:
    log = Log()
    log.user("show me the log 🚀 日志")
    huge = "日志🚀x" * 40_000  # 320,000 bytes, multibyte throughout
    log.call("bash", "cat big.log", huge)
    for audience in ("router", "generator"):
        projection = POLICY.project(
            log.events, audience, reserved_bytes=1000, read_artifact=log.read
        )
        assert projection.bytes <= POLICY.budget(audience) - 1000
        assert "bytes omitted; full output: artifacts/c1-output.txt" in projection.text
        assert "show me the log 🚀 日志" in projection.text
        projection.text.encode("utf-8").decode("utf-8")  # no split characters


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_events=st.integers(1, 400),
    seed=st.integers(0, 10_000),
    reserved=st.integers(0, 20_000),
    jev=st.integers(1500, 28_000),
)
def test_random_sessions_and_budgets_never_exceed(
    n_events: int, seed: int, reserved: int, jev: int
) -> None:
    policy = ContextPolicy(jev_bytes=jev, flash_bytes=jev * 2)
    log = synthetic(n_events, seed=seed, big_every=10)
    for audience in ("router", "generator"):
        budget = policy.budget(audience) - reserved
        try:
            projection = policy.project(
                log.events, audience, reserved_bytes=reserved, read_artifact=log.read
            )
        except ContextOverflow:
            continue
        assert len(projection.text.encode("utf-8")) <= budget
        assert all(t in projection.text for t in requests_of(log))


def test_utf8_cuts_never_split_a_character() -> None:
    text = "a🚀b数据c" * 50
    for limit in range(0, 200):
        assert nbytes(cut_head(text, limit)) <= limit
        assert nbytes(cut_tail(text, limit)) <= limit
        cut = excerpt(text, limit, "artifacts/x.txt")
        assert nbytes(cut) <= limit
    assert cut_head("🚀🚀", 5) == "🚀"
    assert cut_tail("🚀🚀", 7) == "🚀"


# --- pinned intent and overflow --------------------------------------------------------


def test_pinned_intent_that_cannot_fit_raises_with_a_clear_message() -> None:
    log = Log()
    log.user("x" * 30_000)
    with pytest.raises(ContextOverflow, match="JEV_CONTEXT_BYTES") as info:
        POLICY.project(log.events, "router", reserved_bytes=0)
    assert "Nothing was trimmed" in str(info.value)
    generator = POLICY.project(log.events, "generator", reserved_bytes=0)
    assert "x" * 30_000 in generator.text


def test_reserved_bytes_count_against_the_budget() -> None:
    log = Log()
    log.user("y" * 15_000)
    POLICY.project(log.events, "router", reserved_bytes=0)
    with pytest.raises(ContextOverflow):
        POLICY.project(log.events, "router", reserved_bytes=9_500)


def test_earlier_current_requests_and_previous_answer_are_labelled() -> None:
    log = Log()
    log.user("first request")
    log.final("first answer")
    log.user("second request")
    log.final("second answer")
    log.user("third request")
    text = POLICY.project(log.events, "generator", reserved_bytes=0).text
    assert "EARLIER REQUESTS" in text and "first request" in text and "second request" in text
    current = text.index("== CURRENT REQUEST #5 (user, verbatim) ==\nthird request")
    assert current > text.index("second request")
    assert "PREVIOUS ASSISTANT ANSWER #4, status completed (conversation, not evidence)" in text
    assert "second answer" in text and "first answer" not in text


def test_jev_budget_above_28000_is_refused() -> None:
    with pytest.raises(ConfigError, match="JEV_CONTEXT_BYTES"):
        ContextPolicy.from_settings(28_001, 96_000)
    assert ContextPolicy.from_settings(28_000, 96_000).budget("router") == 28_000


# --- archival, status, uncertainty -------------------------------------------------------


def test_archival_keeps_latest_four_whole_and_rows_for_older() -> None:
    log = Log()
    log.user("run many things")
    for i in range(60):
        log.call("bash", f"step {i}", f"output {i} " + "z" * 3000, exit_code=i % 3)
    projection = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read)
    text = projection.text
    assert projection.archived > 0
    assert "ARCHIVED EXECUTION" in text
    recent = text[text.index("== RECENT EXECUTION") :]
    for i in range(56, 60):
        assert f"output {i} " in recent  # the latest four are whole
    assert "#2 bash step 0 → ok, exit code 0 [artifacts/c1-output.txt]" in text or (
        "earlier calls not shown" in text
    )
    assert "latest execution: #120 bash step 59 → ok, exit code 2" in text
    assert "latest verification (last shell command): #120 bash step 59" in text


def test_small_sessions_are_not_archived() -> None:
    log = Log()
    log.user("small")
    for i in range(5):
        log.call("bash", f"echo {i}", f"out {i}")
    projection = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read)
    assert projection.archived == 0 and "ARCHIVED" not in projection.text
    assert all(f"out {i}" in projection.text for i in range(5))


def test_uncertain_calls_stay_as_facts_and_unacknowledged_ones_are_pinned() -> None:
    log = Log()
    log.user("deploy")
    call = log.start("bash", "make deploy")
    log.uncertain(call, "bash")
    for i in range(80):
        log.call("read", f"f{i}.py", "q" * 2000)
    text = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read).text
    assert "UNCERTAIN, not acknowledged: #2 bash make deploy → outcome unknown; not re-run" in text
    log.uncertain(call, "bash", acknowledged=True)
    text = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read).text
    assert "UNCERTAIN, not acknowledged" not in text
    assert "make deploy → outcome unknown; not re-run (cause worker_exit, acknowledged)" in text


def test_unreadable_artifact_does_not_stop_projection() -> None:
    log = Log()
    log.user("look")
    log.call("bash", "ls", "preview text")

    def broken(rel: str) -> str:
        raise FileNotFoundError(rel)

    text = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=broken).text
    assert "preview text" in text and "full output unreadable: FileNotFoundError" in text


def test_error_events_are_facts() -> None:
    log = synthetic(200, seed=5)
    log.add(ErrorData(stage="route", error_class="ProviderError", message="503 from Jev"))
    log.call("bash", "ls", "x")
    text = POLICY.project(log.events, "generator", reserved_bytes=0, read_artifact=log.read).text
    assert "error in stage route: ProviderError" in text


# --- read snapshots: one test per rule -----------------------------------------------------


def read_call(path: str, view_range: str = "", seq: int = 1) -> Call:
    return Call(
        call_id=f"{path}{view_range}{seq}",
        tool="read",
        target=path,
        seq=seq,
        status="ok",
        view_range=view_range,
    )


def test_rule_read_replaces_same_file_and_range_and_keeps_six() -> None:
    cache: list[Call] = []
    for i in range(8):
        cache = remember_read(cache, read_call(f"f{i}.py", seq=i))
    assert [c.target for c in cache] == [f"f{i}.py" for i in range(2, 8)]
    cache = remember_read(cache, read_call("f7.py", seq=99))
    assert len(cache) == 6 and cache[-1].seq == 99
    cache = remember_read(cache, read_call("f7.py", "[1,5]", seq=100))
    assert len(cache) == 6 and {c.view_range for c in cache if c.target == "f7.py"} == {"", "[1,5]"}


def test_rule_failed_read_is_no_snapshot() -> None:
    failed = read_call("a.py")
    failed.status = "error"
    assert remember_read([], failed) == []


def test_rule_shell_and_mcp_invalidate_all() -> None:
    cache = [read_call("a.py"), read_call("b.py")]
    assert invalidate_for_action(cache, "bash", "ls") == []
    assert invalidate_for_action(cache, "mcp.search", "q") == []
    assert invalidate_for_action(cache, "recall", "q") == cache


def test_rule_write_and_edit_invalidate_their_target_only() -> None:
    cache = [read_call("a.py"), read_call("a.py", "[1,2]"), read_call("b.py")]
    for tool in ("write", "edit"):
        assert [c.target for c in invalidate_for_action(cache, tool, "a.py")] == ["b.py"]


def test_rule_uncertain_and_new_request_invalidate_all() -> None:
    cache = [read_call("a.py")]
    assert invalidate_for_uncertain(cache) == []
    assert invalidate_for_request(cache) == []


def snapshot_log(action: str) -> Log:
    log = Log()
    log.user("inspect")
    log.read_file("a.py", [1, 3], "AAA-content")
    log.read_file("b.py", None, "BBB-content")
    if action == "bash":
        log.call("bash", "ls", "listing")
    elif action == "mcp":
        log.call("mcp.search", "x", "found")
    elif action == "edit":
        log.call("edit", "a.py", "edited")
    elif action == "write":
        log.call("write", "b.py", "written")
    elif action == "uncertain":
        log.uncertain(log.start("read", "c.py"), "read")
    elif action == "user":
        log.user("next request")
    return log


@pytest.mark.parametrize(
    ("action", "alive"),
    [
        ("none", {"a.py", "b.py"}),
        ("bash", set()),
        ("mcp", set()),
        ("uncertain", set()),
        ("user", set()),
        ("edit", {"b.py"}),
        ("write", {"a.py"}),
    ],
)
def test_fold_applies_each_invalidation_rule(action: str, alive: set[str]) -> None:
    state = fold(State(), snapshot_log(action).events)
    assert {c.target for c in state.snapshots} == alive


def test_snapshots_survive_archival_within_the_active_request() -> None:
    log = Log()
    log.user("read then search a lot")
    log.read_file("keep.py", [1, 9], "SNAPSHOT-BODY " * 20)
    for i in range(200):
        log.call("recall", f"q{i}", "r" * 1500)  # read-only: invalidates nothing
    text = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read).text
    section = text[text.index("== READ SNAPSHOTS") :]
    assert "[read snapshot: observation as of seq 3] #2 read keep.py lines [1,9]" in section
    assert "SNAPSHOT-BODY" in section
    log.call("bash", "touch keep.py", "")
    text = POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read).text
    assert "READ SNAPSHOTS" not in text and "SNAPSHOT-BODY" not in text


# --- checkpoints ---------------------------------------------------------------------------


def test_two_checkpoints_of_the_same_log_are_byte_identical(short_tmp: Path) -> None:
    log = synthetic(3000, seed=11)
    first, info = POLICY.checkpoint(log.events, "router")
    second, _ = ContextPolicy(jev_bytes=10_000).checkpoint(list(log.events), "generator")
    assert first == second
    assert info.checkpoint == f"context-{info.through}.json" and info.method == "deterministic"
    a, b = short_tmp / "a", short_tmp / "b"
    a.mkdir(), b.mkdir()
    name = write_checkpoint(a, first, info.through)
    write_checkpoint(b, second, info.through)
    assert (a / name).read_bytes() == (b / name).read_bytes()
    assert [p.name for p in a.iterdir()] == [name]  # no temp file left behind


def test_projection_from_a_checkpoint_reads_only_later_events(short_tmp: Path) -> None:
    log = synthetic(5000, seed=3, request_rate=0.002)
    data, info = POLICY.checkpoint(log.events, "router")
    write_checkpoint(short_tmp, data, info.through)
    checkpoint = load_latest_checkpoint(short_tmp)
    assert checkpoint is not None and checkpoint.through == info.through
    log.user("after the checkpoint 🧭")
    log.call("bash", "pytest", "1 passed")
    # Scramble the history the checkpoint covers: a projection must not read it again.
    for event in log.events[: info.through]:
        if isinstance(event.data, UserData):
            event.data = UserData(text="SCRAMBLED")
    projection = POLICY.project(
        log.events, "router", reserved_bytes=0, read_artifact=log.read, checkpoint=checkpoint
    )
    assert "SCRAMBLED" not in projection.text
    assert "after the checkpoint 🧭" in projection.text and "1 passed" in projection.text
    assert projection.through == log.events[-1].seq and projection.archived > 0
    assert projection.bytes <= POLICY.budget("router")


def test_foreign_or_corrupt_checkpoints_are_ignored(short_tmp: Path) -> None:
    log = synthetic(300, seed=4)
    data, info = POLICY.checkpoint(log.events, "router")
    write_checkpoint(short_tmp, data, info.through)
    (short_tmp / f"context-{info.through + 5}.json").write_bytes(b'{"torn":')
    checkpoint = load_latest_checkpoint(short_tmp)
    assert checkpoint is not None and checkpoint.through == info.through
    other = Log()
    other.events = [
        msg.__class__(**{**_fields(msg), "session_id": "cd" * 16}) for msg in log.events
    ]
    other.artifacts = log.artifacts
    assert POLICY.state(other.events, checkpoint).session_id == "cd" * 16  # folded afresh
    short = log.events[: info.through - 10]
    assert POLICY.state(short, checkpoint).through == short[-1].seq  # beyond the log: ignored


def _fields(event: object) -> dict[str, object]:
    return {f: getattr(event, f) for f in event.__struct_fields__}  # type: ignore[attr-defined]


@pytest.mark.slow  # asserts a wall-clock bound
def test_checkpoint_start_is_cheaper_than_a_full_fold(short_tmp: Path) -> None:
    log = synthetic(60_000, seed=9, request_rate=0.0005)
    data, info = POLICY.checkpoint(log.events[:-20], "router")
    write_checkpoint(short_tmp, data, info.through)
    checkpoint = load_latest_checkpoint(short_tmp)

    def best(**kw: object) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            POLICY.project(log.events, "router", reserved_bytes=0, read_artifact=log.read, **kw)
            times.append(time.perf_counter() - started)
        return min(times)

    assert best(checkpoint=checkpoint) * 5 < best()


def test_compact_on_a_real_session_writes_one_checkpoint_and_two_events(
    short_tmp: Path,
) -> None:
    from kernel.store.session import Session

    workspace = short_tmp / "ws"
    workspace.mkdir()
    session = Session.create(short_tmp / "home", workspace)
    try:
        session.append(UserData(text="compact me 🧊"))
        for i in range(30):
            session.append(FinalData(status="completed", summary=f"answer {i}"))
        last = session.events[-1].seq
        written = compact(session)
        assert [w.audience for w in written] == ["router", "generator"]
        assert {w.checkpoint for w in written} == {f"context-{last}.json"}
        assert [e.kind for e in session.events[-2:]] == ["compaction", "compaction"]
        again, _ = POLICY.checkpoint(session.events[:-2], "router")
        assert (session.directory / f"context-{last}.json").read_bytes() == again
        projection = ContextView(session, POLICY).project("router", 100)  # the loop's own path
        assert "compact me 🧊" in projection.text and projection.through == last + 2
    finally:
        session.close()


# --- recall in the working set ---------------------------------------------------------------


def recall_log() -> Log:
    log = Log()
    log.user("configure the flux capacitor")
    log.call("bash", "grep capacitor", "capacitor settings live in ZEBRAFILE.cfg")
    log.final("The capacitor setting is in ZEBRAFILE.cfg")
    for i in range(300):
        log.call("bash", f"step {i}", "noise " * 300)
    log.user("now change the capacitor")
    log.call("bash", "echo hi", "hi")
    return log


def test_recall_pages_join_with_provenance(short_tmp: Path) -> None:
    log = recall_log()
    index = RecallIndex.open_or_rebuild(short_tmp / "memory.sqlite3")
    index.sync(log.events, log.read)
    text = POLICY.project(
        log.events, "generator", reserved_bytes=0, read_artifact=log.read, recall=index
    ).text
    section = text[text.index("== OLDER HISTORY FROM RECALL") :]
    assert "historical effect: bash grep capacitor" in section
    assert "ZEBRAFILE.cfg" in section
    assert "configure the flux capacitor" not in section  # requests are pinned, not recalled
    index.close()


class ExplodingRecall:
    def relevant(self, *args: object, **kw: object) -> list[object]:
        raise RuntimeError("disk on fire")


@pytest.mark.parametrize("damage", ["corrupt", "delete"])
def test_broken_recall_index_does_not_stop_projection(short_tmp: Path, damage: str) -> None:
    log = recall_log()
    path = short_tmp / "memory.sqlite3"
    index = RecallIndex.open_or_rebuild(path)
    index.sync(log.events, log.read)
    if damage == "corrupt":
        index.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(b"this is not a database" * 100)
        index = RecallIndex.open_or_rebuild(path)
    else:
        path.unlink()  # while the index is open: the next sync must notice
    assert index.sync(log.events, log.read) > 0  # rebuilt from the log
    assert path.exists() and index.search("ZEBRAFILE")
    text = POLICY.project(
        log.events, "generator", reserved_bytes=0, read_artifact=log.read, recall=index
    ).text
    assert "ZEBRAFILE.cfg" in text[text.index("== OLDER HISTORY FROM RECALL") :]
    index.close()


def test_failing_recall_does_not_stop_projection() -> None:
    log = recall_log()
    projection = POLICY.project(
        log.events, "router", reserved_bytes=0, read_artifact=log.read, recall=ExplodingRecall()
    )
    assert "now change the capacitor" in projection.text
    assert "OLDER HISTORY FROM RECALL" not in projection.text


def test_uncertain_event_kinds_use_protocol_types() -> None:
    # Guards the fold against a renamed field in protocol/events.py.
    data = ToolUncertainData(
        call_id="c", tool="bash", cause="kernel_exit", acknowledged=False, note="n"
    )
    log = Log()
    log.user("u")
    log.add(data)
    state = fold(State(), log.events)
    assert state.calls[0].status == "uncertain" and state.calls[0].cause == "kernel_exit"


def test_a_stopped_command_is_rendered_as_stopped_not_as_still_running() -> None:
    """`interrupted` is a fact on tool_finished: the model reads why the command ended, and
    an old log line without it (exit code -1 alone) still reads as unfinished."""
    from kernel.context.render import outcome
    from kernel.context.state import State, call_index, fold
    from protocol.events import Event, ToolFinishedData, ToolStartedData

    def finished(call_id: str, **fields: object) -> ToolFinishedData:
        return ToolFinishedData(call_id=call_id, tool="bash", status="error", **fields)  # type: ignore[arg-type]

    events = [
        Event(
            session_id="s",
            seq=1,
            time=0.0,
            kind="tool_started",
            data=ToolStartedData(
                call_id="a", tool="bash", target="sleep 9", request="", arguments=""
            ),
        ),
        Event(
            session_id="s",
            seq=2,
            time=0.0,
            kind="tool_finished",
            data=finished("a", exit_code=-1, interrupted=True, reason="cancelled"),
        ),
        Event(
            session_id="s",
            seq=3,
            time=0.0,
            kind="tool_started",
            data=ToolStartedData(call_id="b", tool="bash", target="make", request="", arguments=""),
        ),
        Event(
            session_id="s", seq=4, time=0.0, kind="tool_finished", data=finished("b", exit_code=-1)
        ),
    ]
    calls = call_index(fold(State(), events))
    assert outcome(calls["a"]) == "error, exit code -1 (command stopped: cancelled, not success)"
    assert "still running when recorded" in outcome(calls["b"])


def test_the_recall_index_is_opened_only_once_the_log_holds_a_page_it_could_offer(
    short_tmp: Path,
) -> None:
    """Recall offers older non-user pages only: a new session's first projections are the same
    without the index, which is then not opened (sqlite was on the path to the first Jev
    request, issue 11); the first final (an indexed kind) opens it, and it indexes the whole
    log, the earlier requests included."""
    from kernel.store.session import Session

    workspace = short_tmp / "ws"
    workspace.mkdir()
    session = Session.create(short_tmp / "home", workspace)
    index_file = session.directory / "memory.sqlite3"
    try:
        session.append(UserData(text="configure the flux capacitor"))
        session.append(UserData(text="and the capacitor's flux"))
        view = ContextView(session, POLICY)
        lazy = view.project("router", 100).text
        assert not index_file.exists()
        other = short_tmp / "other.sqlite3"
        eager = POLICY.project(
            session.events,
            "router",
            reserved_bytes=100,
            read_artifact=session.artifacts.read_text,
            recall=RecallIndex.open_or_rebuild(other),
        ).text
        assert lazy == eager
        session.append(FinalData(status="completed", summary="the capacitor is configured"))
        view.project("router", 100)
        assert index_file.exists()
        index = view.recall_index()
        assert index is not None and index.search("capacitor", limit=10)
    finally:
        session.close()
