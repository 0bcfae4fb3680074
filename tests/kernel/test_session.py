"""Session store: create/open, the single-writer lock across processes, kill -9, listing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel.errors import CorruptLog, SessionLocked, SessionNotFound, UsageError
from kernel.store.catalog import list_sessions, sessions_home
from kernel.store.session import Session
from protocol.events import (
    CleanupWarningData,
    FinalData,
    ModelProgressData,
    RunStartedData,
    ToolStartedData,
    UserData,
)
from tests.support.session import ROOT, log_lines, read_line, writer

SECRET = "tok-4f9a8b7c6d5e"


@pytest.fixture
def home(short_tmp: Path) -> Path:
    return short_tmp / "sessions"


@pytest.fixture
def workspace(short_tmp: Path) -> Path:
    ws = short_tmp / "ws"
    ws.mkdir()
    return ws


def test_create_writes_a_durable_session_record_and_binds_the_workspace(home, workspace):
    seen = []
    with Session.create(home, workspace, on_event=seen.append) as s:
        assert len(s.id) == 32 and int(s.id, 16) >= 0
        assert s.directory == home / s.id
        assert (s.directory / "artifacts").is_dir() and (s.directory / "terminal").is_dir()
        assert s.workspace == workspace.resolve()
        assert [e.kind for e in seen] == ["session"]
        assert s.status == "new"
    [record] = log_lines(home / s.id)
    assert record["seq"] == 1 and record["kind"] == "session"
    assert record["data"]["workspace"] == str(workspace.resolve())
    assert record["data"]["session_id"] == s.id
    assert sorted(p.name for p in home.iterdir()) == [s.id]  # no staging left


def test_create_refuses_a_missing_workspace_and_leaves_nothing(home, short_tmp):
    with pytest.raises(UsageError, match="does not exist"):
        Session.create(home, short_tmp / "nope")
    assert not home.exists()


def test_create_failing_midway_leaves_no_half_session(home, workspace, monkeypatch):
    def broken(self, event, durable=False):
        raise OSError("disk full")

    monkeypatch.setattr("kernel.store.event_log.EventLog.append", broken)
    with pytest.raises(OSError, match="disk full"):
        Session.create(home, workspace)
    assert list(home.iterdir()) == []
    assert list_sessions(home) == []


def test_append_assigns_seq_persists_then_notifies(home, workspace):
    order = []

    def subscriber(event):
        # persisted before anyone hears of it (one round may write several lines)
        seqs = [r["seq"] for r in log_lines(home / event.session_id)]
        order.append((event.kind, event.seq, event.seq in seqs))

    with Session.create(home, workspace, on_event=subscriber) as s:
        s.append(UserData(text="hello"))
        s.append(RunStartedData(model="m"), durable=True)
    assert order == [("session", 1, True), ("user", 2, True), ("run_started", 3, True)]
    assert [r["seq"] for r in log_lines(home / s.id)] == [1, 2, 3]


def test_a_raising_subscriber_never_stops_persistence(home, workspace, capfd):
    def bad(event):
        raise RuntimeError(f"subscriber broke with {SECRET}")

    with Session.create(home, workspace, on_event=bad, secrets=[SECRET]) as s:
        s.append(UserData(text="one"))
        s.append(FinalData(status="completed", summary="two"))
    assert [r["kind"] for r in log_lines(home / s.id)] == ["session", "user", "final"]
    err = capfd.readouterr().err
    assert "subscriber broke" in err and SECRET not in err


def test_appends_from_many_threads_keep_seq_file_and_announcement_order(home, workspace):
    import threading

    seen = []
    with Session.create(home, workspace, on_event=lambda e: seen.append(e.seq)) as s:
        threads = [
            threading.Thread(target=lambda: [s.append(UserData(text="x")) for _ in range(50)])
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen == list(range(1, 202))
    assert [r["seq"] for r in log_lines(home / s.id)] == seen


def test_a_subscriber_may_append_in_turn(home, workspace):
    def echo(event):
        if event.kind == "user" and event.data.text == "ping":
            s.append(UserData(text="pong"))

    s = Session.create(home, workspace, on_event=echo)
    with s:
        s.append(UserData(text="ping"))
    assert [r["data"].get("text") for r in log_lines(home / s.id)] == [None, "ping", "pong"]


def test_emit_is_transient_and_redacted(home, workspace):
    seen = []
    with Session.create(home, workspace, on_event=seen.append, secrets=[SECRET]) as s:
        s.emit(ModelProgressData(stage="generate", characters=42))
        s.emit(CleanupWarningData(error_class="X", message=f"left {SECRET}"))
        s.append(UserData(text="after"))
    assert [(e.kind, e.seq) for e in seen[1:]] == [
        ("model_progress", None),
        ("cleanup_warning", None),
        ("user", 2),
    ]
    assert seen[2].data.message == "left [REDACTED]"
    assert [r["kind"] for r in log_lines(home / s.id)] == ["session", "user"]


def test_secrets_never_reach_the_log_or_artifacts(home, workspace):
    with Session.create(home, workspace, secrets=[SECRET]) as s:
        s.append(UserData(text=f"use {SECRET} please"))
        s.append(
            ToolStartedData(
                call_id="c1",
                tool="bash",
                target=f"echo {SECRET}",
                request="artifacts/r.json",
                arguments=SECRET,
            )
        )
        s.artifacts.write_json("r.json", {"command": f"echo {SECRET}", SECRET: [SECRET]})
        s.artifacts.write_text("out.txt", f"{SECRET}\n")
        s.redactor.add("late-secret-value")
        s.append(FinalData(status="completed", summary="late-secret-value"))
        assert s.events[1].data.text == "use [REDACTED] please"
    for path in s.directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and b"late-secret-value" not in data, path
    assert "[REDACTED]" in (s.directory / "events.jsonl").read_text()


def test_a_secret_that_spells_a_status_or_stage_keeps_the_record_valid(home, workspace):
    """Issue 20 item 7: an MCP env value `completed` (or `respond`, `kernel_exit`) made every
    record with that Literal value invalid (ValidationError on append); now the fixed
    vocabulary stays, and the same word in text is still redacted."""
    words = ("completed", "respond", "kernel_exit", "worker_exit")
    with Session.create(home, workspace, secrets=words) as s:
        s.append(FinalData(status="completed", summary="completed: respond, then kernel_exit"))
        s.emit(ModelProgressData(stage="respond", characters=3))
        assert s.events[-1].data.status == "completed"
        assert s.events[-1].data.summary == "[REDACTED]: [REDACTED], then [REDACTED]"
    assert [line["data"].get("status") for line in log_lines(s.directory)] == [None, "completed"]


def test_open_refuses_a_jev_harness_session_before_touching_it(home, workspace):
    """Issue 20 item 9: the Python API refuses what the CLI refuses, naming `jev-harness
    inspect`, before the lock or the log (a torn tail stays as it is); inspect still opens it."""
    with Session.create(home, workspace, created_by="jev-harness") as s:
        pass
    log = s.directory / "events.jsonl"
    with log.open("ab") as f:
        f.write(b'{"version":1,')
    before = (log.read_bytes(), sorted(p.name for p in s.directory.iterdir()))
    with pytest.raises(UsageError, match=f"`jev-harness inspect {s.id}`"):
        Session.open(home, s.id)
    assert (log.read_bytes(), sorted(p.name for p in s.directory.iterdir())) == before
    with Session.open(home, s.id, harness=True) as again:
        assert again.events[0].data.created_by == "jev-harness"


def test_status_follows_the_last_final(home, workspace):
    with Session.create(home, workspace) as s:
        assert s.status == "new"
        s.append(UserData(text="a"))
        assert s.status == "running"
        s.append(FinalData(status="needs_input", summary="which file?"))
        assert s.status == "needs_input"
        s.append(UserData(text="b"))
        assert s.status == "running"


def test_open_reads_back_everything_and_continues_the_sequence(home, workspace):
    with Session.create(home, workspace) as s:
        s.append(UserData(text="a"))
    with Session.open(home, s.id) as again:
        assert [e.kind for e in again.events] == ["session", "user"]
        assert again.workspace == workspace.resolve()
        assert again.append(UserData(text="b")).seq == 3


@pytest.mark.parametrize("bad_id", ["0" * 32, "../x", "", "ABCDEF" * 6, "/etc"])
def test_open_unknown_session_is_not_found(home, workspace, bad_id):
    Session.create(home, workspace).close()
    with pytest.raises(SessionNotFound):
        Session.open(home, bad_id)


def test_second_writer_in_the_same_process_is_refused_and_close_is_idempotent(home, workspace):
    s = Session.create(home, workspace)
    with pytest.raises(SessionLocked, match=f"process {os.getpid()}"):
        Session.open(home, s.id)
    s.close()
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.append(UserData(text="x"))
    Session.open(home, s.id).close()


def test_open_refuses_a_log_of_another_session(home, workspace):
    a = Session.create(home, workspace)
    b = Session.create(home, workspace)
    a.close()
    b.close()
    (home / b.id / "events.jsonl").write_bytes((home / a.id / "events.jsonl").read_bytes())
    with pytest.raises(CorruptLog, match="session record"):
        Session.open(home, b.id)


def test_two_processes_race_for_one_session(home, workspace):
    with Session.create(home, workspace) as s:
        sid = s.id
    with writer(home, sid, 50) as a, writer(home, sid, 50) as b:
        start = time.monotonic()
        loser = None
        while loser is None:  # exactly one loses, at once, naming the holder
            loser = next((p for p in (a, b) if p.poll() is not None), None)
            assert time.monotonic() - start < 10, "nobody lost the race"
        winner = b if loser is a else a
        assert loser.returncode == 2
        assert read_line(winner).startswith("locked")
        assert f"process {winner.pid}" in loser.stderr.read()
        assert read_line(winner) == "done"
        winner.stdin.close()
        assert winner.wait(10) == 0
    assert [r["seq"] for r in log_lines(home / sid)] == list(range(1, 52))


@pytest.mark.slow  # asserts a wall-clock bound
def test_a_locked_session_refuses_within_a_second(home, workspace):
    with Session.create(home, workspace) as s, writer(home, s.id, 1) as proc:
        # wait for the interpreter to be up, so the clock measures the lock attempt only
        assert proc.wait(10) == 2
        err = proc.stderr.read()
        assert "SessionLocked" in err and f"process {os.getpid()}" in err
    code = (
        "import time, sys; from kernel.store.session import Session; t = time.monotonic()\n"
        "try: Session.open(sys.argv[1], sys.argv[2])\n"
        "except Exception as e: print(type(e).__name__, time.monotonic() - t)\n"
    )
    with Session.create(home, workspace) as s:
        out = subprocess.run(
            [sys.executable, "-c", code, str(home), s.id],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
    name, seconds = out.stdout.split()
    assert name == "SessionLocked" and float(seconds) < 1.0


def test_writer_killed_mid_appends_leaves_a_log_that_opens(home, workspace):
    with Session.create(home, workspace) as s:
        sid = s.id
    with writer(home, sid, 0) as proc:
        assert read_line(proc).startswith("locked")
        while not read_line(proc).startswith("appended 300"):
            pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    # the dead writer's lock is free at once, and nothing but a torn tail can be lost
    with Session.open(home, sid) as again:
        seqs = [e.seq for e in again.events]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 301  # 300 said durable
        torn = list(again.directory.glob("events.jsonl.torn-*"))
        assert len(torn) <= 1
        if torn:
            assert again.events[-1].kind == "error"
            assert again.events[-1].data.error_class == "TornRecord"


def test_sessions_home_precedence(monkeypatch, short_tmp):
    monkeypatch.delenv("JMP_SESSIONS_DIR", raising=False)
    assert sessions_home(None) == ROOT / ".jmp" / "sessions"
    monkeypatch.setenv("JMP_SESSIONS_DIR", str(short_tmp / "env"))
    assert sessions_home(None) == short_tmp / "env"
    assert sessions_home(str(short_tmp / "flag")) == short_tmp / "flag"
    assert not (short_tmp / "env").exists()


def test_list_sessions_empty_and_missing(home):
    assert list_sessions(home) == []
    home.mkdir()
    assert list_sessions(home) == []


def test_list_sessions_reports_each_session(home, workspace):
    with Session.create(home, workspace) as done:
        done.append(UserData(text="  fix the\nfailing   test " + "x" * 200))
        done.append(FinalData(status="completed", summary="ok"))
    with Session.create(home, workspace) as fresh:
        pass
    with Session.create(home, workspace) as busy:
        busy.append(UserData(text="first"))
        busy.append(FinalData(status="blocked", summary="no"))
        busy.append(UserData(text="second"))
        busy.append(RunStartedData(model="m"))
    (home / ".new-deadbeef").mkdir()  # a create that crashed before its rename
    (home / "notes.txt").write_text("not a session")
    (home / ("f" * 32)).mkdir()  # no log at all
    with open(busy.directory / "events.jsonl", "ab") as f:
        f.write(b'{"version":1,"sess')  # a torn tail is skipped, not fatal
    infos = {i.session_id: i for i in list_sessions(home)}
    assert set(infos) == {done.id, fresh.id, busy.id}
    assert infos[done.id].status == "completed" and infos[done.id].events == 3
    assert infos[done.id].title.startswith("fix the failing test xxx")
    assert len(infos[done.id].title) == 80
    assert infos[fresh.id].status == "new" and infos[fresh.id].title == ""
    assert infos[busy.id].status == "running" and infos[busy.id].title == "first"
    assert infos[busy.id].last_activity == busy.events[-1].time
    assert infos[busy.id].workspace == str(workspace.resolve())
    assert list_sessions(home)[0].session_id == busy.id  # most recent first


def test_list_sessions_reads_far_back_in_a_long_log(home, workspace):
    with Session.create(home, workspace) as s:
        s.append(UserData(text="t" * 100_000))  # longer than the head read
        s.append(FinalData(status="cancelled", summary="stop"))
        for n in range(600):  # more than the first tail read after the final
            s.append(ToolStartedData(call_id=str(n), tool="bash", target="x" * 300, request="r"))
    [info] = list_sessions(home)
    assert info.status == "cancelled" and info.events == 603
    assert info.title == "t" * 79 + "…"


def test_list_sessions_marks_an_unreadable_log(home, workspace):
    with Session.create(home, workspace) as s:
        pass
    (s.directory / "events.jsonl").write_bytes(b"garbage\n")
    [info] = list_sessions(home)
    assert info.status == "unreadable"


def test_list_takes_no_lock_and_writes_nothing(home, workspace):
    with Session.create(home, workspace) as s:
        s.append(UserData(text="held"), durable=True)
        before = {p: p.read_bytes() for p in s.directory.rglob("*") if p.is_file()}
        [info] = list_sessions(home)
        assert info.status == "running"
        assert {p: p.read_bytes() for p in s.directory.rglob("*") if p.is_file()} == before


def test_kernel_session_imports_no_vendor_sdk():
    code = (
        "import sys, kernel.store.session, kernel.store.artifacts, kernel.store.event_log\n"
        "import cli.main\n"
        "vendor = ('openhands', 'openai', 'typesafe_sdk', 'mcp', 'zmq')\n"
        "bad = [m for m in vendor if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
