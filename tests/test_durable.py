"""Durable before visible (issue 21, item 3): what a subscriber hears of, and what a durable
record names, survives a power cut; a cache derived from the log is checked against it.

Fast tests watch the system calls (which fsync, in which order); the FUSE tests pull the plug
on a real writer process (tests/fakes/stepper.py) through the power-cut simulator and read
what the disk kept. Each failed on 2b9f963 (the code before the fix).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jmp_lab.chaos.powercut.control import LossyDisk
from kernel.context.checkpoint import build_checkpoint, decode_checkpoint, usable
from kernel.context.recall.index import RecallIndex
from kernel.errors import StorageError
from kernel.store.session import Session
from protocol.codec import encode_event
from protocol.events import (
    Event,
    ModelProgressData,
    ModelStartedData,
    RouteData,
    ToolFinishedData,
    ToolStartedData,
    UsageData,
    UserData,
)
from tests.fakes.stepper import text
from tests.support.context import Log
from tests.support.lossy import fuse, lossy_disk
from tests.support.session import ROOT


@pytest.fixture
def home(short_tmp: Path) -> Path:
    return short_tmp / "sessions"


@pytest.fixture
def workspace(short_tmp: Path) -> Path:
    ws = short_tmp / "ws"
    ws.mkdir()
    return ws


def _name(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class Calls:
    """Records, in order, every fsync (by path) and every line written to a log (by kind)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, str]] = []
        real_fsync = os.fsync
        from kernel.store import event_log

        real_write = event_log.write_all

        def fsync(fd: int) -> None:
            self.seen.append(("fsync", _name(fd)))
            real_fsync(fd)

        def write(fd: int, data: bytes) -> None:
            if _name(fd).endswith("events.jsonl"):
                self.seen.append(("write", json.loads(data)["kind"]))
            real_write(fd, data)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(event_log, "write_all", write)

    def before(self, kind: str) -> list[str]:
        """The paths fsynced before the line of `kind` was written."""
        index = self.seen.index(("write", kind))
        return [path for op, path in self.seen[:index] if op == "fsync"]


# --- announcements -----------------------------------------------------------------------


def test_a_subscriber_hears_of_a_record_only_after_an_fsync_covered_it(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = {"bytes": 0}  # how far the log is known durable
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        if _name(fd).endswith("events.jsonl"):
            synced["bytes"] = max(synced["bytes"], os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", fsync)
    heard: list[tuple[str, bool]] = []

    def subscriber(event: Event) -> None:
        if event.seq is None:
            heard.append((event.kind, True))
            return
        log = (home / event.session_id / "events.jsonl").read_bytes()
        end = log.index(encode_event(event)) + len(encode_event(event)) + 1
        heard.append((event.kind, end <= synced["bytes"]))

    with Session.create(home, workspace, on_event=subscriber) as s:
        s.append(UserData(text="one"))
        s.emit(ModelProgressData(stage="route", characters=3))
        s.append(RouteData(choice="bash", confidence=0.9, context_bytes=1, probabilities={}))
        s.append(ToolStartedData(call_id="c", tool="bash", target="t", request=""), durable=True)
        s.append(UserData(text="two"))
    assert heard == [
        ("session", True),
        ("user", True),
        ("model_progress", True),  # transient, in its place: after the record before it
        ("route", True),
        ("tool_started", True),
        ("user", True),
    ]


def test_records_of_one_step_share_an_fsync_and_a_durable_one_is_on_disk_when_appended(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session.create(home, workspace) as s:
        calls = Calls(monkeypatch)
        for n in range(20):
            s.append(UserData(text=f"line {n}"))
        s.append(ToolStartedData(call_id="c", tool="bash", target="t", request=""), durable=True)
        assert ("write", "tool_started") in calls.seen
        assert calls.seen[-1] == ("fsync", str(s.directory / "events.jsonl"))
        log_syncs = [p for op, p in calls.seen if op == "fsync" and p.endswith("events.jsonl")]
    assert 1 <= len(log_syncs) < 21  # grouped: far fewer fsyncs than records


def test_a_tools_result_is_synced_at_once_and_the_next_route_rides_on_its_tool_started(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipelining (kernel/store/commit.py): `tool_finished` gets a round of its own while
    the agent routes on; the route's records wait (here the gather deadline is an hour, so
    only a durable record can move them) and are written and announced with the next
    `tool_started`, before it returns, in order, after the fsync that covers them."""
    from kernel.store import commit

    monkeypatch.setattr(commit, "GATHER_S", 3600.0)
    heard: list[str] = []
    got = threading.Event()

    def subscriber(event: Event) -> None:
        heard.append(event.kind)
        if event.kind == "tool_finished":
            got.set()

    with Session.create(home, workspace, on_event=subscriber) as s:
        calls = Calls(monkeypatch)
        s.append(ToolFinishedData(call_id="c1", tool="bash", status="ok"))
        assert got.wait(60), "a tool's result waited for a later round"
        s.append(ModelStartedData(stage="route", model="jev"))
        s.emit(ModelProgressData(stage="route", characters=3))  # waits behind it, in order
        s.append(UsageData(provider="typesafe", stage="route", model="jev", seconds=0.1))
        s.append(RouteData(choice="bash", confidence=0.9, context_bytes=1, probabilities={}))
        time.sleep(0.3)  # the commit thread's chance to write them: it must not take it
        assert heard == ["session", "tool_finished"]  # nothing written or shown of them yet
        assert ("write", "model_started") not in calls.seen
        s.append(ToolStartedData(call_id="c2", tool="bash", target="t", request=""), True)
        assert heard[2:] == ["model_started", "model_progress", "usage", "route", "tool_started"]
        writes = [(op, what) for op, what in calls.seen if op == "write"]
        assert writes[-4:] == [
            ("write", k) for k in ("model_started", "usage", "route", "tool_started")
        ]
        log = str(s.directory / "events.jsonl")
        assert calls.seen[-1] == ("fsync", log)  # one fsync after the four lines
        after_route = calls.seen[calls.seen.index(("write", "model_started")) :]
        assert [x for x in after_route if x[0] == "fsync"] == [("fsync", log)]


# --- what durable records name ------------------------------------------------------------


def test_artifacts_and_their_directory_are_fsynced_before_the_record_naming_them_is_written(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session.create(home, workspace) as s:
        calls = Calls(monkeypatch)
        arts = s.artifacts
        request = arts.write_json("c1.request.json", {"command": "true"})
        s.append(ToolStartedData(call_id="c1", tool="bash", target="t", request=request), True)
        output = arts.write_text("c1.output.txt", "out")
        result = arts.write_json("c1.result.json", {"text": "out"})
        s.append(
            ToolFinishedData(
                call_id="c1", tool="bash", status="ok", artifact=result, full_output=output
            )
        )
    directory = str(s.directory / "artifacts")
    assert {str(s.directory / request), directory} <= set(calls.before("tool_started"))
    after = calls.before("tool_finished")[len(calls.before("tool_started")) :]
    assert {str(s.directory / output), str(s.directory / result), directory} <= set(after)


def test_a_new_session_is_fsynced_into_place_before_it_is_announced(
    short_tmp: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = short_tmp / "new" / "sessions"  # neither exists yet
    order: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, Path.rename

    def fsync(fd: int) -> None:
        order.append(("fsync", _name(fd)))
        real_fsync(fd)

    def rename(self: Path, target: str | os.PathLike[str]) -> Path:
        order.append(("rename", str(self)))
        return real_rename(self, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Path, "rename", rename)
    heard: list[list[tuple[str, str]]] = []
    with Session.create(home, workspace, on_event=lambda e: heard.append(list(order))) as s:
        staging = str(home / f".new-{s.id}")
    [at_announcement] = heard
    renamed = at_announcement.index(("rename", staging))
    assert ("fsync", staging) in at_announcement[:renamed]  # its entries, then its name
    assert ("fsync", str(home)) in at_announcement[renamed:]
    assert {("fsync", str(short_tmp)), ("fsync", str(short_tmp / "new"))} <= set(order)


# --- a failed fsync -----------------------------------------------------------------------


def _failing_fsync(monkeypatch: pytest.MonkeyPatch, suffix: str, times: int = 1) -> None:
    """The next `times` fsyncs of a path ending in `suffix` fail with EIO (a disk that fails
    once, then works: a retry would succeed and prove nothing)."""
    real = os.fsync
    left = [times]

    def fsync(fd: int) -> None:
        if _name(fd).endswith(suffix) and left[0] > 0:
            left[0] -= 1
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_after_eio_on_fsync_the_session_stops_naming_the_file_and_shows_nothing_more(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard: list[str] = []
    s = Session.create(home, workspace, on_event=lambda e: heard.append(e.kind))
    try:
        _failing_fsync(monkeypatch, "events.jsonl")
        s.append(UserData(text="never shown"))
        started = ToolStartedData(call_id="c", tool="bash", target="t", request="")
        with pytest.raises(StorageError) as failed:
            s.append(started, durable=True)
        message = str(failed.value)
        assert "Input/output error" in message and str(home / s.id / "events.jsonl") in message
        assert "cut off again" in message  # never shown, and now never found either
        assert (home / s.id / "events.jsonl").read_bytes().count(b"\n") == 1
        with pytest.raises(StorageError, match="Input/output error"):  # fsync works again
            s.append(UserData(text="later"))
        with pytest.raises(StorageError, match="Input/output error"):
            s.sync()
        s.emit(ModelProgressData(stage="route", characters=1))  # dropped, not raised
    finally:
        s.close()  # the failure was reported already: close releases quietly
    assert heard == ["session"]
    with Session.open(home, s.id) as again:  # a later run starts from what the disk holds
        assert [e.kind for e in again.events] == ["session"]


def test_a_failure_in_the_commit_thread_is_raised_by_close_if_nothing_else_did(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard: list[str] = []
    s = Session.create(home, workspace, on_event=lambda e: heard.append(e.kind))
    _failing_fsync(monkeypatch, "artifacts")  # the directory of an artifact
    rel = s.artifacts.write_text("c.output.txt", "out")
    s.append(ToolFinishedData(call_id="c", tool="bash", status="ok", full_output=rel))
    with pytest.raises(StorageError, match=r"cannot fsync .*/artifacts: Input/output error"):
        s.close()
    assert heard == ["session"]
    again = Session.open(home, s.id)  # the lock is free, and nothing names a lost artifact
    again.close()
    assert [e.kind for e in again.events] == ["session"]


# --- caches derived from the log ------------------------------------------------------------


def _two_histories() -> tuple[Log, Log]:
    """A log of 9 records, and what a power cut and a later run made of it: the first 6,
    then 3 other records under seqs 7-9 (the same length: no watermark runs ahead)."""
    before, after = Log(), Log()
    for log in (before, after):
        log.user("request 1: the PARSER")
        log.call("bash", "make", "built fine")
        log.call("read", "a.py", "print(1)")
        log.add(RouteData(choice="bash", confidence=0.9, context_bytes=1, probabilities={}))
    before.call("bash", "pytest", "FLAMINGO passed")
    before.final("FLAMINGO done")
    after.uncertain("c3", "bash")
    after.user("request 2: HERON")
    after.final("HERON done")
    assert len(before.events) == len(after.events) == 9
    return before, after


def test_the_recall_index_is_rebuilt_when_the_log_holds_other_records_under_its_seqs(
    short_tmp: Path,
) -> None:
    before, after = _two_histories()
    index = RecallIndex.open_or_rebuild(short_tmp / "memory.sqlite3")
    index.sync(before.events, before.read)
    assert index.search("flamingo")
    index.close()
    reopened = RecallIndex.open_or_rebuild(short_tmp / "memory.sqlite3")  # the next run
    reopened.sync(after.events, after.read)
    assert reopened.search("flamingo") == []
    assert sorted(p.seq for p in reopened.search("heron")) == [8, 9]
    assert {p.kind for p in reopened.page(7)} == {"tool_uncertain"}
    reopened.close()


def test_a_checkpoint_of_records_the_log_no_longer_holds_is_not_used() -> None:
    before, after = _two_histories()
    data, through = build_checkpoint(before.events, keep_whole=1)
    checkpoint = decode_checkpoint(data)
    assert through == 9 and usable(checkpoint, before.events)
    assert not usable(checkpoint, after.events)
    assert build_checkpoint(before.events, keep_whole=1)[0] == data  # still deterministic


# --- pulled plugs, through the simulator ----------------------------------------------------


@pytest.fixture
def make_disk(tmp_path: Path) -> Iterator[Callable[[str], LossyDisk]]:
    with contextlib.ExitStack() as disks:
        yield lambda model: disks.enter_context(lossy_disk(tmp_path, model))


# After the n-th fsync of the log: on 2b9f963 the journal model had then committed the names
# of output artifacts whose data was never synced (class 4: a silent prefix).
AFTER_3RD_LOG_FSYNC = {"op": "fsync", "pattern": r"/events\.jsonl$", "nth": 3}


@fuse
@pytest.mark.parametrize(
    ("model", "data", "dirs", "seed", "aim"),
    [
        ("strict", "lose", "lose", 1, None),
        ("name", "torn-byte", "subset", 2, None),
        ("journal", "torn-byte", "subset", 3, None),
        ("journal", "torn-page", "lose", 4, None),
        ("journal", "torn-byte", "lose", 5, AFTER_3RD_LOG_FSYNC),
    ],
)
def test_after_a_power_cut_every_announced_record_and_what_durable_records_name_is_there(
    make_disk: Callable[[str], LossyDisk],
    short_tmp: Path,
    model: str,
    data: str,
    dirs: str,
    seed: int,
    aim: dict[str, object] | None,
) -> None:
    """A writer steps on the lossy disk, printing what its subscriber hears; the power is cut
    while it goes on (once it has heard of 5 steps, or where `aim` freezes the disk). The disk
    must hold complete artifacts for every record it holds, and every record heard of."""
    disk = make_disk(model)
    if aim is not None:
        disk.arm([aim])
    workspace = short_tmp / "ws"
    workspace.mkdir()
    command = [sys.executable, "-m", "tests.fakes.stepper", str(disk.mount / "s"), str(workspace)]
    writer = subprocess.Popen(
        [*command, "5"], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert writer.stdout is not None
    heard: list[dict[str, object]] = []
    cut = False
    try:
        if aim is not None:
            assert disk.wait(timeout=300) is not None, "the aimed operation never came"
        else:
            total = None
            while total is None or len(heard) < total:
                line = writer.stdout.readline()
                assert line, "the writer ended"
                if line.startswith("done "):
                    total = int(line.split()[1])
                else:
                    heard.append(json.loads(line))
            disk.freeze()  # it is still stepping: some of its writes and fsyncs are cut short
        writer.kill()  # it dies once the cut answers what it waits for on the disk
        disk.cut(data, dirs, seed=seed)
        cut = True
        heard += [json.loads(x) for x in writer.stdout.read().splitlines() if x.startswith("{")]
    finally:
        if not cut:  # a frozen disk holds the killed writer until something answers it
            with contextlib.suppress(Exception):
                disk.freeze()
                writer.kill()
                disk.cut("lose", "lose")
        writer.kill()
        writer.wait()
        writer.stdout.close()
    session_id = str(heard[0]["session_id"])
    home = disk.backing / "s"
    assert Session.exists(home, session_id), "the session that was announced vanished"
    with Session.open(home, session_id) as again:
        for event in again.events:
            names = [getattr(event.data, f, "") for f in ("request", "artifact", "full_output")]
            call_id = getattr(event.data, "call_id", "")
            for rel in filter(None, names):
                path = again.directory / rel
                assert path.exists(), f"{rel}, named by seq {event.seq}, is missing"
                content = path.read_text()
                if rel.endswith(".json"):
                    content = json.loads(content)["body"] if content.endswith("}\n") else ""
                assert content == text(call_id), f"{rel} of seq {event.seq} is not complete"
        kept = {e.seq: json.loads(encode_event(e)) for e in again.events}
        for record in heard:
            assert kept.get(record["seq"]) == record  # type: ignore[call-overload]
