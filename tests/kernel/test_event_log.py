"""events.jsonl: torn tails at every byte are recovered; corrupt lines are refused untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.errors import CorruptLog, JmpError, UnsupportedLogVersion
from kernel.store.event_log import EventLog, parse_log
from kernel.store.session import Session
from protocol.codec import encode_event, make_event
from protocol.events import FinalData, ToolFinishedData, ToolStartedData, UserData


@pytest.fixture
def session_dir(short_tmp: Path) -> Path:
    """A closed session with four events; returns its directory."""
    with Session.create(short_tmp / "s", short_tmp) as s:
        s.append(UserData(text="list files"))
        s.append(ToolStartedData(call_id="c1", tool="bash", target="ls", request="artifacts/r"))
        s.append(ToolFinishedData(call_id="c1", tool="bash", status="ok", exit_code=0, text="a\nb"))
    return s.directory


def _record(sid: str, seq: int) -> bytes:
    event = make_event(sid, seq, 1.5, FinalData(status="completed", summary="done ✓ — ünïcode"))
    return encode_event(event) + b"\n"


def test_append_writes_one_complete_line_each(short_tmp):
    log = EventLog(short_tmp / "events.jsonl")
    for seq in (1, 2, 3):
        log.append(
            make_event("a" * 32, seq, 1.0, UserData(text=f"line {seq}\nwith newline")),
            durable=seq == 2,
        )
    log.close()
    log.close()
    raw = (short_tmp / "events.jsonl").read_bytes()
    assert raw.count(b"\n") == 3 and raw.endswith(b"\n")
    assert [e.data.text for e in EventLog(short_tmp / "events.jsonl").load()][1] == (
        "line 2\nwith newline"
    )


def test_torn_tail_at_every_byte_offset_is_recovered(session_dir, short_tmp):
    path = session_dir / "events.jsonl"
    original = path.read_bytes()
    record = _record(session_dir.name, 5)
    home = session_dir.parent
    for cut in range(1, len(record)):  # every proper prefix, the newline-less whole line included
        path.write_bytes(original + record[:cut])
        for old in session_dir.glob("events.jsonl.torn-*"):
            old.unlink()
        with Session.open(home, session_dir.name) as s:
            [archive] = session_dir.glob("events.jsonl.torn-*")
            assert archive.read_bytes() == record[:cut], cut
            assert [e.seq for e in s.events] == [1, 2, 3, 4, 5]
            last = s.events[-1]
            assert (last.kind, last.data.stage, last.data.error_class) == (
                "error",
                "recall",
                "TornRecord",
            )
            assert archive.name in last.data.message
        raw = path.read_bytes()
        assert raw.startswith(original) and raw.endswith(b"\n"), cut
        assert raw.count(b"\n") == 5


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda lines: [*lines[:2], b'{"version":1,"sess', *lines[2:]], id="interior"),
        pytest.param(lambda lines: [*lines, b"not json"], id="complete-last-line"),
        pytest.param(lambda lines: [*lines[:1], b"", *lines[1:]], id="blank-line"),
        pytest.param(lambda lines: [*lines, b'{"version":1}'], id="missing-fields"),
        pytest.param(lambda lines: [lines[0], lines[2], lines[1], lines[3]], id="seq-order"),
        pytest.param(lambda lines: lines[:2] + lines[3:], id="seq-gap"),
        pytest.param(
            lambda lines: [*lines, lines[-1].replace(b'"seq":4', b'"seq":null')], id="null-seq"
        ),
        pytest.param(
            lambda lines: [*lines, lines[-1].replace(b'"status":"ok"', b'"status":7')],
            id="bad-field-type",
        ),
    ],
)
def test_corrupt_complete_lines_are_refused_and_nothing_is_written(session_dir, damage):
    path = session_dir / "events.jsonl"
    lines = path.read_bytes().splitlines()
    damaged = b"\n".join(damage(lines)) + b"\n" + b'{"torn'  # a torn tail too: still untouched
    path.write_bytes(damaged)
    before = sorted(p.name for p in session_dir.iterdir())
    with pytest.raises(CorruptLog, match=r"line \d+") as info:
        Session.open(session_dir.parent, session_dir.name)
    assert "nothing was written" in str(info.value)
    assert path.read_bytes() == damaged
    assert sorted(p.name for p in session_dir.iterdir()) == before
    with pytest.raises(CorruptLog):
        Session.open(session_dir.parent, session_dir.name)  # the lock was released: not Locked


def test_the_line_number_is_named(session_dir):
    path = session_dir / "events.jsonl"
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join([*lines[:2], b"{oops", *lines[2:]]) + b"\n")
    with pytest.raises(CorruptLog, match="line 3 "):
        EventLog(path).load()


def test_a_newer_version_is_refused_clearly(session_dir):
    path = session_dir / "events.jsonl"
    future = json.loads(path.read_bytes().splitlines()[-1])
    future.update(version=2, seq=5)
    damaged = path.read_bytes() + json.dumps(future).encode() + b"\n"
    path.write_bytes(damaged)
    with pytest.raises(UnsupportedLogVersion, match="version 2") as info:
        Session.open(session_dir.parent, session_dir.name)
    assert isinstance(info.value, JmpError) and "line 5" in str(info.value)
    assert path.read_bytes() == damaged


def test_unknown_kinds_and_fields_are_kept_as_read(session_dir):
    path = session_dir / "events.jsonl"
    last = json.loads(path.read_bytes().splitlines()[-1])
    later = [
        {**last, "seq": 5, "kind": "telemetry", "data": {"anything": [1, 2]}},
        {**last, "seq": 6, "extra_envelope": True, "data": {**last["data"], "new_field": "x"}},
    ]
    path.write_bytes(path.read_bytes() + b"".join(json.dumps(r).encode() + b"\n" for r in later))
    with Session.open(session_dir.parent, session_dir.name) as s:
        unknown, known = s.events[4], s.events[5]
        assert not unknown.known and unknown.data == {"anything": [1, 2]}
        assert known.kind == "tool_finished" and known.data.exit_code == 0
        assert not hasattr(known.data, "new_field")
        assert s.append(UserData(text="next")).seq == 7


def test_parse_log_stops_at_the_last_newline():
    buf = _record("b" * 32, 1) + b'{"partial'
    events, end = parse_log(buf)
    assert len(events) == 1 and end == buf.index(b"\n") + 1
    assert parse_log(b"") == ([], 0)


def test_a_log_with_only_a_torn_line_is_refused_untouched(session_dir):
    path = session_dir / "events.jsonl"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CorruptLog, match="session record"):
        Session.open(session_dir.parent, session_dir.name)
    assert len(path.read_bytes()) == 40
    assert not list(session_dir.glob("events.jsonl.torn-*"))


def test_another_sessions_log_is_refused_before_any_recovery(session_dir, short_tmp):
    other = short_tmp / "s" / ("e" * 32)
    other.mkdir()
    damaged = (session_dir / "events.jsonl").read_bytes() + b'{"torn'
    (other / "events.jsonl").write_bytes(damaged)
    with pytest.raises(CorruptLog, match="session record"):
        Session.open(other.parent, other.name)
    assert (other / "events.jsonl").read_bytes() == damaged
    assert not list(other.glob("events.jsonl.torn-*"))


@pytest.mark.parametrize("change", ["replace", "move", "delete", "hardlink-then-delete"])
def test_a_log_changed_under_the_writer_is_detected_before_the_append(
    session_dir: Path, change: str
) -> None:
    """Issue 9, item 7: never append into a file nobody reads (a deleted or replaced inode)."""
    from kernel.errors import LogReplaced

    session = Session.open(session_dir.parent, session_dir.name)
    log = session_dir / "events.jsonl"
    if change == "replace":  # what an editor's rename-over does
        copy = session_dir / "copy"
        copy.write_bytes(log.read_bytes())
        copy.replace(log)
    elif change == "move":
        log.rename(session_dir / "moved.jsonl")
    elif change == "delete":
        log.unlink()
    else:
        (session_dir / "second-name").hardlink_to(log)
        log.unlink()
    try:
        with pytest.raises(LogReplaced, match="while the session ran"):
            session.append(UserData(text="never written"), durable=True)
    finally:
        session.close()
    for path in session_dir.iterdir():
        if path.is_file() and path.name != "lock":
            assert b"never written" not in path.read_bytes()


def test_a_failed_append_leaves_no_half_line(
    session_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk mid-write (issue 9, item 15): the log is cut back to its last whole line."""
    import os

    from kernel.errors import StorageError
    from kernel.store import event_log

    session = Session.open(session_dir.parent, session_dir.name)
    before = (session_dir / "events.jsonl").read_bytes()

    def half_then_full(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(event_log, "write_all", half_then_full)
    try:
        with pytest.raises(StorageError, match=r"append the user record to .*ENOSPC"):
            session.append(UserData(text="x" * 1000), durable=True)
    finally:
        session.close()
    assert (session_dir / "events.jsonl").read_bytes() == before


# A power cut during the recovery of a torn tail: it archives the bytes (durable, as
# `<archive>.pending`), cuts the log back (fsync), appends the error record (durable), then
# names the archive. Whichever of those reached the disk, the next open ends with each torn
# tail archived once, byte for byte, and reported by exactly one error record.

PENDING = "events.jsonl.torn-20261201T000000-000000001.pending"


def _torn_state(session_dir: Path, step: str) -> bytes:
    """The disk a cut leaves after `step` of a recovery of a torn tail; the torn bytes."""
    path = session_dir / "events.jsonl"
    torn = _record(session_dir.name, 5)[:40]
    if step == "archived":  # the log's cut-back was not durable yet
        path.write_bytes(path.read_bytes() + torn)
    (session_dir / PENDING).write_bytes(torn)
    return torn


def _archives_and_reports(s: Session) -> tuple[list[bytes], list[str]]:
    names = sorted(p.name for p in s.directory.glob("events.jsonl.torn-*"))
    assert not [n for n in names if n.endswith(".pending")], names
    reports = [e.data.message for e in s.events if e.kind == "error"]
    for name in names:
        assert sum(name in message for message in reports) == 1, (name, reports)
    return [(s.directory / n).read_bytes() for n in names], reports


@pytest.mark.parametrize("step", ["archived", "cut-back"])
def test_a_cut_during_the_recovery_of_a_torn_tail_is_finished_by_the_next_open(
    session_dir: Path, step: str
) -> None:
    torn = _torn_state(session_dir, step)
    with Session.open(session_dir.parent, session_dir.name) as s:
        archives, reports = _archives_and_reports(s)
        assert archives == [torn] and len(reports) == 1
        assert [e.seq for e in s.events] == [1, 2, 3, 4, 5]
    with Session.open(session_dir.parent, session_dir.name) as again:  # nothing more to do
        assert [e.seq for e in again.events] == [1, 2, 3, 4, 5]


def test_a_cut_after_the_error_record_before_the_archive_is_named(
    session_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernel.store import torn_tail

    torn = _torn_state(session_dir, "cut-back")
    with monkeypatch.context() as patch:
        patch.setattr(torn_tail.TornTail, "finish", lambda self: None)  # the power went first
        Session.open(session_dir.parent, session_dir.name).close()
    assert (session_dir / PENDING).exists()
    with Session.open(session_dir.parent, session_dir.name) as s:
        archives, reports = _archives_and_reports(s)
        assert archives == [torn] and len(reports) == 1  # reported once, not again


def test_a_torn_report_of_a_pending_archive_is_archived_and_reported_too(
    session_dir: Path,
) -> None:
    first = _torn_state(session_dir, "cut-back")
    path = session_dir / "events.jsonl"
    error = make_event(session_dir.name, 5, 1.0, FinalData(status="error", summary="x"))
    second = (encode_event(error) + b"\n")[:30]  # the cut tore the error record's append
    path.write_bytes(path.read_bytes() + second)
    with Session.open(session_dir.parent, session_dir.name) as s:
        archives, reports = _archives_and_reports(s)
        assert sorted(archives) == sorted([first, second]) and len(reports) == 2
        assert [e.seq for e in s.events] == [1, 2, 3, 4, 5, 6]
