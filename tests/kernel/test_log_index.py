"""events.index (issue 25): a session opens by reading only its log's ends, and a record changed
inside a verified prefix fails visibly wherever it is read, and at once under --verify.

The stride is 4 here (1024 in use), so a 22-record log has five verified chunks and two records
after them: every case is a few small files.
"""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from kernel.errors import CorruptLog
from kernel.store import log_index, pending
from kernel.store.event_log import EventLog
from kernel.store.log_events import LogEvents
from kernel.store.session import Session
from protocol.codec import make_event
from protocol.events import (
    FinalData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

STRIDE = 4
SID = "ab" * 16
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
        # pending calls read only after the settled watermark (record 22): not lines 9-12
        assert s.events.settled == RECORDS and pending.unsettled(s.events) == []
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


# --- the settled watermark: pending calls read from it, never past an uncertain call ---------


def started(call_id: str, tool: str = "bash") -> ToolStartedData:
    return ToolStartedData(call_id=call_id, tool=tool, target="make", request="")


def finished(call_id: str, **facts: Any) -> ToolFinishedData:
    return ToolFinishedData(call_id=call_id, tool="bash", status="ok", **facts)


@pytest.fixture
def left_open(short_tmp: Path) -> tuple[Path, str]:
    """A closed session whose call c1 (seq 3) has no end, and 19 requests after it: every
    entry (4, 8, ..., 20) is unsettled; (home, id)."""
    home = short_tmp / "s"
    with Session.create(home, short_tmp) as s:
        s.append(UserData(text="request 02"))
        s.append(started("c1"))
        for n in range(4, RECORDS + 1):
            s.append(UserData(text=f"request {n:02d}"))
    return home, s.id


def entries_of(home: Path, sid: str) -> list[log_index.Entry]:
    found = log_index.read(home / sid, sid)
    assert found is not None
    return found[1]


def forge(home: Path, sid: str, k: int, sealed: bool = False, **state: Any) -> None:
    """Rewrite entry k's state (`settled`, `resume`, ...) with a valid CRC, and with its seal
    recomputed when `sealed`: what a forger with write access could do."""
    entries = entries_of(home, sid)
    new = list(entries)
    new[k] = new[k]._replace(**state)
    index = home / sid / log_index.NAME
    raw = bytearray(index.read_bytes())
    log_index.IndexWriter(home / sid, sid, STRIDE, None).write(new)
    if not sealed:  # the state's bytes changed, its seal kept: only the CRC made valid
        at = log_index.HEADER_SIZE + k * log_index.ENTRY_SIZE
        body = bytearray(index.read_bytes()[at : at + log_index.ENTRY_SIZE - 4])
        body[-8:] = raw[at + len(body) - 8 : at + len(body)]
        raw[at : at + log_index.ENTRY_SIZE] = bytes(body) + zlib.crc32(body).to_bytes(4, "little")
        index.write_bytes(bytes(raw))


def test_the_settled_mark_of_each_entry_is_what_a_full_read_of_the_calls_finds(short_tmp):
    home = short_tmp / "s"
    with Session.create(home, short_tmp) as s:
        s.append(UserData(text="request"))  # 2
        s.append(started("c1"))  # 3: open across entry 4
        s.append(UserData(text="more"))  # 4
        s.append(finished("c1", exit_code=0))  # 5
        for n in range(6, 12):
            s.append(UserData(text=f"request {n}"))  # 8 settled
        s.append(finished("c2", exit_code=-1))  # 12: an end without a start: settles nothing
    sid = s.id
    assert [(e.seq, e.settled, e.resume) for e in entries_of(home, sid)] == [
        (4, False, (3,)),  # what rebuilds the call open across it: its start
        (8, True, ()),
        (12, True, ()),
    ]
    good = (home / sid / log_index.NAME).read_bytes()
    (home / sid / log_index.NAME).unlink()
    with Session.open(home, sid) as s:  # rebuilt by a full check: the same marks
        assert s.events.settled == 12 and pending.unsettled(s.events) == []
    assert (home / sid / log_index.NAME).read_bytes() == good


def test_a_call_open_across_entries_is_found_on_reopen_and_its_ack_moves_the_watermark(left_open):
    home, sid = left_open
    assert not any(e.settled for e in entries_of(home, sid))
    assert {e.resume for e in entries_of(home, sid)} == {(3,)}  # every entry: c1's start
    with Session.open(home, sid) as s:  # resumed at the last entry, record 3 read for c1
        assert s.events.settled == 20 and [e.seq for e in s.events.resume] == [3]
        assert [r.call_id for r in pending.unsettled(s.events)] == ["c1"]
        s.append(
            ToolUncertainData(
                call_id="c1", tool="bash", cause="kernel_exit", note="", acknowledged=True
            )
        )
        assert s.events.settled == RECORDS + 1 and pending.unsettled(s.events) == []
        for n in range(3):
            s.append(UserData(text=f"after {n}"))
    assert [e.settled for e in entries_of(home, sid)] == [False] * 5 + [True]  # entry 24
    with Session.open(home, sid) as s:
        assert s.events.settled == RECORDS + 4 and pending.unsettled(s.events) == []


@pytest.mark.parametrize("k", [4, 2], ids=["last-entry", "interior-entry"])
def test_a_forged_settled_mark_is_a_damaged_index_and_the_open_call_is_still_found(left_open, k):
    home, sid = left_open
    forge(home, sid, k, settled=True, resume=())  # CRC valid: only the seal disagrees
    with Session.open(home, sid) as s:  # the index is cut there: resumed at the entry before
        assert [r.call_id for r in pending.unsettled(s.events)] == ["c1"]
        assert [e.seq for e in s.events.resume] == [3]
    assert not any(e.settled for e in entries_of(home, sid))  # and written again from it
    assert len(entries_of(home, sid)) == 5


def test_a_settled_mark_changed_on_disk_fails_its_crc_and_the_index_is_rebuilt(left_open):
    home, sid = left_open
    index = home / sid / log_index.NAME
    raw = bytearray(index.read_bytes())
    flags = log_index.HEADER_SIZE + 2 * log_index.ENTRY_SIZE + 32  # entry 2's flags word
    raw[flags] = 1
    index.write_bytes(bytes(raw))
    with Session.open(home, sid) as s:
        assert [r.call_id for r in pending.unsettled(s.events)] == ["c1"]
    assert not any(e.settled for e in entries_of(home, sid))


def test_a_forged_resume_point_is_caught_where_it_is_read_and_by_verify(left_open, capsys):
    home, sid = left_open
    digest = entries_of(home, sid)[4].digest
    forge(home, sid, 4, sealed=True, digest=b"\0" * 16)  # the last chunk no longer chains
    with pytest.raises(CorruptLog, match="lines 17-20"):
        Session.open(home, sid)  # open hashes the last chunk: visible
    forge(home, sid, 4, sealed=True, digest=digest)  # undone
    forge(home, sid, 4, sealed=True, settled=True, resume=())  # a consistent forgery
    with Session.open(home, sid) as s:
        # A consistent forgery of the index is not seen by an open that trusts it...
        assert pending.unsettled(s.events) == []
    # ...and --verify, which reads every line and recomputes every mark, rewrites it.
    assert main(["--session", sid, "--verify", "--sessions-dir", str(home), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert not any(e.settled for e in entries_of(home, sid))
    with Session.open(home, sid) as s:
        assert [r.call_id for r in pending.unsettled(s.events)] == ["c1"]


@pytest.mark.parametrize("fmt", [1, 2], ids=["no-marks", "settled-marks-only"])
def test_an_index_of_an_older_format_is_rebuilt_and_said_once(session, fmt, capsys):
    home, sid = session
    index = home / sid / log_index.NAME
    good = index.read_bytes()
    header = bytearray(good[: log_index.HEADER_SIZE - 4])
    header[8:12] = fmt.to_bytes(4, "little")  # a valid CRC: an older build's file
    old = bytes(header) + zlib.crc32(bytes(header)).to_bytes(4, "little")
    index.write_bytes(old + good[log_index.HEADER_SIZE :])
    with Session.open(home, sid) as s:
        assert s.events.settled == RECORDS
    assert index.read_bytes() == good
    assert capsys.readouterr().err.count(f"was of an older format ({fmt}); rebuilt") == 1
    with Session.open(home, sid):
        pass
    assert "older format" not in capsys.readouterr().err


def random_calls(seed: int, n: int) -> list[object]:
    """Records of calls in any order the kernel may write them (and some it never would)."""
    rng = random.Random(seed)
    data: list[object] = []
    ids: list[str] = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.3 or not ids:
            ids.append(f"c{len(ids)}")
            data.append(started(ids[-1], rng.choice(["bash", "bash", "str_replace_editor"])))
        elif roll < 0.65:
            facts = rng.choice(
                [
                    {"exit_code": 0},
                    {"exit_code": -1},
                    {"exit_code": -1, "interrupted": True, "reason": "cancelled"},
                    {"exit_code": -1, "interrupted": True, "reason": "timeout"},
                ]
            )
            data.append(finished(rng.choice(ids[-4:]), **facts))
        elif roll < 0.8:
            data.append(
                ToolUncertainData(
                    call_id=rng.choice(ids[-4:]),
                    tool="bash",
                    cause="kernel_exit",
                    note="",
                    acknowledged=rng.random() < 0.6,
                )
            )
        else:
            data.append(UserData(text="go on"))
    return data


@pytest.mark.parametrize("seed", range(6))
def test_settling_agrees_with_a_full_read_after_every_record(seed):
    events = [make_event(SID, n, 0.0, d) for n, d in enumerate(random_calls(seed, 300), 1)]
    settling = pending.Settling()
    for n, event in enumerate(events, 1):
        settling.add(event)
        assert settling.settled == (not pending.unsettled(events[:n])), n


@pytest.mark.parametrize("seed", range(3))
def test_pending_calls_of_a_reopened_log_are_those_of_a_full_read(short_tmp, seed):
    home = short_tmp / "s"
    with Session.create(home, short_tmp) as s:
        for data in random_calls(seed, 90):
            s.append(data)  # type: ignore[arg-type]
    full = EventLog(log_of(home, s.id)).load()
    expected = [r.call_id for r in pending.unsettled(full)]
    with Session.open(home, s.id) as again:
        assert [r.call_id for r in pending.unsettled(again.events)] == expected


# --- what reads only after a watermark: replay, compact, a first open's memory --------------


def test_the_replay_of_a_completed_answer_reads_only_the_log_end(session, capsys):
    home, sid = session
    path = log_of(home, sid)
    changed = change_line(path, 10, b"request 10", b"request XX")  # chunk 9-12: not read
    argv = ["--session", sid, "--sessions-dir", str(home), "--json", "--no-mcp"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["data"]["status"] == "completed" and result["data"]["summary"] == "done"
    assert path.read_bytes() == changed  # a replay writes nothing


def test_compact_folds_from_the_previous_checkpoint(session):
    from kernel.context.checkpoint import load_latest_checkpoint
    from kernel.context.compact import compact
    from kernel.context.policy import ContextPolicy

    home, sid = session
    with Session.open(home, sid) as s:
        compact(s)
        for n in range(6):
            s.append(UserData(text=f"later {n}"))
    whole = EventLog(log_of(home, sid)).load()
    change_line(log_of(home, sid), 10, b"request 10", b"request XX")  # before the checkpoint
    with Session.open(home, sid) as s:
        [written] = {r.checkpoint for r in compact(s)}
    checkpoint = load_latest_checkpoint(home / sid)
    assert checkpoint is not None and f"context-{checkpoint.through}.json" == written
    fresh, _ = ContextPolicy().checkpoint(whole, "router")  # a full fold of the good log
    assert (home / sid / written).read_bytes() == fresh


def test_a_full_check_keeps_one_chunk_decoded_at_a_time(session, monkeypatch):
    from kernel.store import event_log

    home, sid = session
    largest = []
    parse = event_log.parse_log

    def counting(*args: Any, **kw: Any) -> Any:
        events, end = parse(*args, **kw)
        largest.append(len(events))
        return events, end

    monkeypatch.setattr(event_log, "parse_log", counting)
    (home / sid / log_index.NAME).unlink()
    with Session.open(home, sid) as s:  # a first open: every line checked
        assert len(s.events) == RECORDS
    assert max(largest) <= STRIDE
    largest.clear()
    with Session.open(home, sid, verify=True) as s:
        assert len(s.events) == RECORDS
    assert max(largest) <= STRIDE and sum(largest) >= RECORDS


def test_a_changed_mark_inside_the_prefix_cuts_the_index_there_and_it_is_written_again(session):
    home, sid = session
    index = home / sid / log_index.NAME
    good = index.read_bytes()
    forge(home, sid, 2, settled=False, resume=(5,))  # entry 12: its seal disagrees
    with Session.open(home, sid) as s:  # records 9-22 read and checked as after entry 8
        assert s.events.settled == RECORDS and pending.unsettled(s.events) == []
        assert s.events[9].data.text == "request 10"
    assert index.read_bytes() == good


# --- open resumes at any entry: the records it decodes do not grow with the log (issue 33) ---


def pairs(n: int) -> list[object]:
    """Bare tool_started / tool_finished pairs with a tool_started at every STRIDE-th record, so
    that a call is open across every entry and none is settled."""
    data: list[object] = [UserData(text="go")]  # 2
    while len(data) < n - 2:
        seq = len(data) + 2
        call = f"c{seq}"
        data += [started(call), finished(call, exit_code=0)] if seq % 2 == 0 else [UserData("x")]
    return data


def open_throughout(n: int) -> list[object]:
    """One call started at record 3 and never ended, pairs after it: the oldest record that
    rebuilds the open calls is as old as the session."""
    return [UserData(text="go"), started("long", "str_replace_editor"), *pairs(n)[1:]][: n - 2]


def bounded_random(n: int, seed: int = 7) -> list[object]:
    """Calls in a random order, at most three open at once, each ended by its end, or by an
    uncertainty record and later its acknowledgement; shell commands left running among them."""
    rng = random.Random(seed)
    data: list[object] = [UserData(text="go")]
    live: list[str] = []
    count = 0
    while len(data) < n - 2:
        roll = rng.random()
        if roll < 0.35 and len(live) < 3:
            count += 1
            live.append(f"r{count}")
            data.append(started(live[-1], rng.choice(["bash", "str_replace_editor"])))
        elif roll < 0.7 and live:
            call = live.pop(rng.randrange(len(live)))
            facts = rng.choice([{"exit_code": 0}, {"exit_code": -1}, {"exit_code": 2}])
            data.append(finished(call, **facts))
        elif roll < 0.8 and live:
            call = rng.choice(live)
            ack = rng.random() < 0.5
            data.append(
                ToolUncertainData(call, "bash", cause="kernel_exit", note="", acknowledged=ack)
            )
            if ack:
                live.remove(call)
        else:
            data.append(UserData(text="go on"))
    return data


def decoded_on_open(home: Path, sid: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list]:
    """How many lines the open and pending.unsettled decode; the unsettled calls' ids."""
    from kernel.store import log_parse

    count = [0]
    decode = log_parse.decode_event

    def counting(line: bytes) -> Any:
        count[0] += 1
        return decode(line)

    monkeypatch.setattr(log_parse, "decode_event", counting)
    with Session.open(home, sid) as s:
        calls = [r.call_id for r in pending.unsettled(s.events)]
    monkeypatch.setattr(log_parse, "decode_event", decode)
    return count[0], calls


@pytest.mark.parametrize("pattern", [pairs, open_throughout, bounded_random])
def test_open_decodes_the_same_few_records_at_any_length_and_any_pattern(
    short_tmp, monkeypatch, pattern
):
    seen = {}
    for n in (62, 602):  # the last entry (60, 600) ends on a tool_started
        home = short_tmp / f"s{n}"
        with Session.create(home, short_tmp) as s:
            for data in pattern(n):
                s.append(data)  # type: ignore[arg-type]
            s.append(FinalData(status="completed", summary="done"))
        assert len(s.events) in (n - 1, n)
        decoded, calls = decoded_on_open(home, s.id, monkeypatch)
        full = EventLog(log_of(home, s.id)).load()
        assert calls == [r.call_id for r in pending.unsettled(full)]
        seen[n] = decoded
    # record 1, the records that rebuild the open calls, the lines after the last entry
    assert seen[602] <= 1 + log_index.RESUME + STRIDE and seen[602] <= seen[62] + 3, seen


def test_pending_calls_agree_with_a_full_read_at_every_length_of_a_random_log(short_tmp):
    home = short_tmp / "s"
    with Session.create(home, short_tmp) as s:
        sid = s.id
    records = bounded_random(160, seed=3) + random_calls(5, 40)  # then many open at once
    for data in records:
        with Session.open(home, sid) as s:  # each record appended after a reopen
            s.append(data)  # type: ignore[arg-type]
            expected = [r.call_id for r in pending.unsettled(list(s.events))]
        with Session.open(home, sid) as again:
            assert [r.call_id for r in pending.unsettled(again.events)] == expected
