"""events.index (issue 25): a session opens by reading only its log's ends, and a record changed
inside a verified prefix fails visibly wherever it is read, and at once under --verify.

The stride is 4 here (1024 in use), so a 22-record log has five verified chunks and two records
after them: every case is a few small files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from kernel.errors import CorruptLog
from kernel.store import log_index, pending
from kernel.store.event_log import EventLog
from kernel.store.log_events import LogEvents
from kernel.store.session import Session
from protocol.events import FinalData, UserData

STRIDE = 4
RECORDS = 22  # the session record, 20 requests, a final: chunks 1-4, 5-8, ..., 17-20; 21-22


@pytest.fixture(autouse=True)
def small_stride(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_index, "STRIDE", STRIDE)


@pytest.fixture
def session(short_tmp: Path) -> tuple[Path, str]:
    """A closed session of RECORDS records, its index written; (home, id)."""
    home = short_tmp / "s"
    with Session.create(home, short_tmp) as s:
        for n in range(2, RECORDS):
            s.append(UserData(text=f"request {n:02d}"))
        s.append(FinalData(status="completed", summary="done"))
    return home, s.id


def log_of(home: Path, sid: str) -> Path:
    return home / sid / "events.jsonl"


def change_line(path: Path, seq: int, old: bytes, new: bytes) -> bytes:
    """Rewrite line `seq` in place (same length: still a valid record); the new bytes."""
    lines = path.read_bytes().split(b"\n")
    assert old in lines[seq - 1] and len(old) == len(new)
    lines[seq - 1] = lines[seq - 1].replace(old, new)
    data = b"\n".join(lines)
    path.write_bytes(data)
    return data


def test_open_reads_the_prefix_through_the_index_and_matches_a_full_parse(session):
    home, sid = session
    found = log_index.read(home / sid, sid)
    assert (
        found is not None
        and found[0] == STRIDE
        and [e.seq for e in found[1]]
        == [
            4,
            8,
            12,
            16,
            20,
        ]
    )
    full = EventLog(log_of(home, sid)).load()  # no session id: the old full parse
    with Session.open(home, sid) as s:
        assert isinstance(s.events, LogEvents) and s.events.prefix == 20
        assert len(s.events) == RECORDS and s.status == "completed"
        assert list(s.events) == full and list(reversed(s.events)) == full[::-1]
        assert s.events[5] == full[5] and s.events[-3:] == full[-3:]
        s.append(UserData(text="more"))
    with Session.open(home, sid) as s:
        assert [e.seq for e in s.events] == list(range(1, RECORDS + 2))


def test_a_record_changed_inside_a_verified_prefix_fails_where_it_is_read(session, capsys):
    home, sid = session
    path = log_of(home, sid)
    changed = change_line(path, 10, b"request 10", b"request XX")  # chunk 9-12: not an end
    with Session.open(home, sid) as s:  # open checks the first and the last chunk only
        assert s.events[-1].kind == "final"
        assert s.events[2].data.text == "request 03"
        with pytest.raises(CorruptLog, match="lines 9-12 changed after they were written"):
            s.events[9]
        with pytest.raises(CorruptLog, match="lines 9-12"):
            list(s.events)  # projection, recall, compact and replay all read this way
        with pytest.raises(CorruptLog, match="lines 9-12"):
            pending.unsettled(s.events)
    assert path.read_bytes() == changed  # nothing was written or repaired
    assert main(["--session", sid, "--verify", "--sessions-dir", str(home), "--json"]) == 2
    out = capsys.readouterr().out
    assert "lines 9-12 changed" in out and path.read_bytes() == changed


@pytest.mark.parametrize(("seq", "chunk"), [(2, "1-4"), (18, "17-20")])
def test_a_record_changed_in_a_chunk_that_open_reads_fails_the_open_untouched(session, seq, chunk):
    home, sid = session
    path = log_of(home, sid)
    changed = change_line(path, seq, f"request {seq:02d}".encode(), b"request XX")
    before = sorted(p.name for p in (home / sid).iterdir())
    with pytest.raises(CorruptLog, match=f"lines {chunk} changed.*nothing was written"):
        Session.open(home, sid)
    assert path.read_bytes() == changed
    assert sorted(p.name for p in (home / sid).iterdir()) == before


def test_a_record_changed_after_the_prefix_is_refused_at_open_as_before(session):
    home, sid = session
    path = log_of(home, sid)
    data = path.read_bytes().replace(b'"seq":21', b'"seq":29')
    path.write_bytes(data)
    with pytest.raises(CorruptLog, match="line 21: seq 29 does not follow 20"):
        Session.open(home, sid)
    assert path.read_bytes() == data


def test_verify_checks_every_line_and_says_so(session, capsys):
    home, sid = session
    assert main(["--session", sid, "--verify", "--sessions-dir", str(home), "--json"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {
        "type": "verified",
        "session_id": sid,
        "records": RECORDS,
        "bytes": log_of(home, sid).stat().st_size,
        "ok": True,
    }


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.unlink(), id="missing"),
        pytest.param(lambda p: p.write_bytes(b"\0" * 200), id="garbage"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-7]), id="torn-entry"),
        pytest.param(
            lambda p: p.write_bytes(p.read_bytes()[: log_index.HEADER_SIZE + 10] + b"x" * 50),
            id="damaged-entry",
        ),
    ],
)
def test_a_missing_or_damaged_index_is_rebuilt_from_the_log(session, damage):
    home, sid = session
    index = home / sid / log_index.NAME
    good = index.read_bytes()
    damage(index)
    with Session.open(home, sid) as s:
        assert [e.seq for e in s.events] == list(range(1, RECORDS + 1))
    assert index.read_bytes() == good


def test_another_sessions_index_is_not_trusted(session, short_tmp):
    home, sid = session
    with Session.create(home, short_tmp) as other:
        for n in range(10):
            other.append(UserData(text=f"other {n}"))
    foreign = (home / other.id / log_index.NAME).read_bytes()
    (home / sid / log_index.NAME).write_bytes(foreign)
    with Session.open(home, sid) as s:
        assert s.events[1].data.text == "request 02" and len(s.events) == RECORDS


def test_a_log_shorter_than_its_verified_prefix_fails_visibly(session):
    home, sid = session
    path = log_of(home, sid)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:14]) + b"\n")  # records 15-22 gone
    with pytest.raises(CorruptLog, match="ends before line 20, which was written and verified"):
        Session.open(home, sid)


def test_a_torn_tail_after_the_prefix_is_archived_as_before(session):
    home, sid = session
    path = log_of(home, sid)
    original = path.read_bytes()
    path.write_bytes(original + b'{"version":1,"sess')
    with Session.open(home, sid) as s:
        assert s.events[-1].data.error_class == "TornRecord"
        assert [e.seq for e in s.events] == list(range(1, RECORDS + 2))
    assert path.read_bytes().startswith(original)
    assert len(list((home / sid).glob("events.jsonl.torn-*"))) == 1


def test_the_index_grows_with_appends_as_a_full_check_would_build_it(session):
    home, sid = session
    with Session.open(home, sid) as s:
        for n in range(6):
            s.append(UserData(text=f"later {n}"), durable=n % 2 == 0)
    index = home / sid / log_index.NAME
    grown = index.read_bytes()
    found = log_index.read(home / sid, sid)
    assert found is not None and [e.seq for e in found[1]] == [4, 8, 12, 16, 20, 24, 28]
    index.unlink()
    with Session.open(home, sid) as s:
        assert s.events.prefix == 28 and len(s.events) == 28
    assert index.read_bytes() == grown
