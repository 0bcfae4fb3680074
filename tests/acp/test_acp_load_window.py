"""`session/load` of a long session (issue 25): the last JMP_ACP_LOAD_TURNS turns, a note and
`_meta.jmp.replay` for what it leaves out, and a cost that follows what it sends: the records
it reads are the window's (the mode and approvals come from acp-modes.json or the log's bytes).

The logs are written through Session (no models, no workers); the cost cases run in this
process with a stride of 4 records, counting the chunks decoded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from acp_server import history, remembered
from acp_server.sink import Sink
from acp_server.translator import Translator
from kernel.errors import SessionRefused
from kernel.store import log_events, log_index
from kernel.store.session import Session
from protocol.events import (
    ApprovalData,
    FinalData,
    ModeData,
    ToolFinishedData,
    ToolStartedData,
    UserData,
)
from tests.acp.helpers import acp_agent, run
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)


def write_turns(home: Path, workspace: Path, turns: int) -> str:
    """A closed session of `turns` turns (request, one bash call, answer); its id."""
    with Session.create(home, workspace) as s:
        for n in range(1, turns + 1):
            s.append(UserData(text=f"request {n}"))
            s.append(ToolStartedData(call_id=f"c{n}", tool="bash", target="true", request=""))
            s.append(ToolFinishedData(call_id=f"c{n}", tool="bash", status="ok", exit_code=0))
            s.append(FinalData(status="completed", summary=f"answer {n}"))
    return s.id


def test_load_replays_the_last_turns_and_says_what_it_left_out(jmp: Cli) -> None:
    sid = write_turns(jmp.home, jmp.workspace.resolve(), 5)  # 21 records

    async def scenario() -> None:
        env = jmp.env() | {"JMP_ACP_LOAD_TURNS": "2"}
        async with acp_agent(jmp, env=env) as agent:
            await agent.conn.initialize(protocol_version=1)
            reply = await agent.conn.load_session(
                cwd=str(jmp.workspace), session_id=sid, mcp_servers=[]
            )
            client = agent.client
            assert client.shown() == ["agent_message_chunk"] + (
                ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"] * 2
            )
            note = client.of("agent_message_chunk")[0].content.text
            assert "Earlier history not shown: records 1 to 13 of this session's 21" in note
            assert "last 2 requests" in note and "JMP_ACP_LOAD_TURNS=0" in note
            users = [u.content.text for u in client.of("user_message_chunk")]
            assert users == ["request 4", "request 5"]
            assert reply.field_meta == {
                "jmp": {
                    "replay": {
                        "records": 21,
                        "from_seq": 14,
                        "omitted_records": 13,
                        "turns": 2,
                        "updates": 9,
                        "limit_turns": 2,
                    }
                }
            }

    run(scenario())


def test_the_window_is_the_last_turns_within_the_record_bound() -> None:
    from protocol.codec import make_event
    from protocol.events import SessionData

    def log(*kinds: str) -> list:
        data = {"u": UserData(text="x"), "f": FinalData(status="completed", summary="y")}
        first = make_event("s" * 32, 1, 0.0, SessionData("s" * 32, "/"))
        return [first] + [make_event("s" * 32, i + 2, 0.0, data[k]) for i, k in enumerate(kinds)]

    events = log(*"uffufufff")  # records 1 (session), 2 u, 3-4 f, 5 u, 6 f, 7 u, 8-10 f
    assert history.window(events, 2) == history.Window(4, 10, 2)  # from record 5
    assert history.window(events, 9) == history.Window(0, 10, 3)  # fewer turns: everything
    assert history.window(events, 0) == history.Window(0, 10)
    bound = history.RECORDS_PER_TURN
    long_turn = log("u", *"f" * (2 * bound))
    assert history.window(long_turn, 1) == history.Window(len(long_turn) - bound, len(long_turn))
    two = log("u", *"f" * (2 * bound), "u", *"f" * 10)  # the bound cuts the first turn out
    assert history.window(two, 2) == history.Window(2 * bound + 2, len(two), 1)
    assert history.load_turns({}) == history.LOAD_TURNS
    assert history.load_turns({"JMP_ACP_LOAD_TURNS": "0"}) == 0
    assert history.load_turns({"JMP_ACP_LOAD_TURNS": " 7 "}) == 7


@pytest.mark.parametrize("name", ["JMP_ACP_LOAD_TURNS", "JMP_ACP_WARM_SESSIONS"])
@pytest.mark.parametrize("value", ["-3", "x", "1.5", "\u0663"])  # U+0663: a digit, not ASCII
def test_a_bad_acp_setting_exits_2_naming_it_before_serving(
    jmp: Cli, name: str, value: str
) -> None:
    """`jmp --acp` with a setting it cannot read says which and why on stderr, exit 2, and
    writes nothing on stdout (the client's channel): not a default that hides the typo."""
    import subprocess
    import sys

    env = jmp.env() | {name: value}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parents[2] / "main.py"), "--acp"],
        input=b"", capture_output=True, env=env, cwd=jmp.workspace, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == b""
    assert f"{name} must be a whole number >= ".encode() in done.stderr
    assert repr(value).encode() in done.stderr or value.encode() in done.stderr


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Stride 4; the first record of every chunk decoded from the log, in order."""
    monkeypatch.setattr(log_index, "STRIDE", 4)
    seen: list[int] = []
    original = log_events.read_chunk

    def counted(fd: int, name: str, session_id: str, entries: list, k: int) -> list:
        seen.append(entries[k - 1].seq + 1 if k else 1)
        return original(fd, name, session_id, entries, k)

    monkeypatch.setattr(log_events, "read_chunk", counted)
    yield seen


def test_opening_for_the_editor_decodes_no_history(short_tmp: Path, decoded: list[int]) -> None:
    """100 turns, 401 records, 100 chunks: binding the sink (the mode and the "always" answers,
    at every load and resume) decodes none of them (before: every chunk)."""
    home = short_tmp / "h"
    sid = write_turns(home, short_tmp, 100)
    with Session.open(home, sid) as s:
        decoded.clear()  # what open itself read
        sink = Sink(SimpleNamespace(loop=None, closed=True))
        sink.bind(SimpleNamespace(session=s))  # type: ignore[arg-type]
        assert (sink.approver.mode, sink.approver.always) == ("auto", set())
        assert decoded == []


def test_a_load_decodes_the_window_not_the_history(short_tmp: Path, decoded: list[int]) -> None:
    """The same log: a 2-turn replay decodes the last chunks only (before: every chunk)."""
    home = short_tmp / "h"
    sid = write_turns(home, short_tmp, 100)
    with Session.open(home, sid) as s:
        decoded.clear()
        shown = history.window(s.events, 2)
        updates = list(
            Translator(s.workspace).replay(history.Tail(s.events, shown.start, shown.end))
        )
        assert len(updates) == 8 and shown.start == 393
        assert decoded and min(decoded) >= 389, decoded  # the last three chunks at most


def test_a_first_load_reads_the_chunks_it_needs_not_the_log(
    short_tmp: Path, decoded: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No acp-modes.json yet (a session never loaded): the mode, the "always" answers and a
    2-turn window read a few chunks of a 100-chunk log, wherever the mode record is (before:
    every byte of it, issue 33); the summary in events.index says which chunks hold one."""
    home = short_tmp / "h"
    sid = write_turns(home, short_tmp, 50)
    with Session.open(home, sid) as s:
        s.append(ModeData(mode="ask"))  # seq 202: chunk 200-204
        allowed = ApprovalData("c10", "edit", "f", decision="allowed", scope="session")
        s.append(allowed)
    with Session.open(home, sid) as s:
        for n in range(51, 101):
            s.append(UserData(text=f"request {n}"))
            s.append(ToolStartedData(call_id=f"c{n}", tool="bash", target="true", request=""))
            s.append(ToolFinishedData(call_id=f"c{n}", tool="bash", status="ok", exit_code=0))
            s.append(FinalData(status="completed", summary=f"answer {n}"))
    size = (home / sid / "events.jsonl").stat().st_size
    read: list[int] = []
    pread = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        data = pread(fd, length, offset)
        read.append(len(data))
        return data

    with Session.open(home, sid) as s:
        decoded.clear()
        monkeypatch.setattr(log_events.os, "pread", counted)
        assert remembered.recall(s) == ("ask", {"edit"})
        shown = history.window(s.events, 2)
        updates = list(
            Translator(s.workspace).replay(history.Tail(s.events, shown.start, shown.end))
        )
        monkeypatch.setattr(log_events.os, "pread", pread)
        assert len(updates) == 8
        assert 201 in decoded and len(decoded) <= 4, decoded  # the mode's chunk, the window's
        assert sum(read) < size / 10, (sum(read), size)


def test_the_mode_and_approvals_come_from_the_log_and_acp_modes_json(
    short_tmp: Path, decoded: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folded from the log's chunks that hold them; kept in acp-modes.json, which the next
    load trusts only while the log holds the same record at its seq, never over the log."""
    monkeypatch.setattr(remembered, "WORTH_SAVING", 8)
    home = short_tmp / "h"
    sid = write_turns(home, short_tmp, 10)
    with Session.open(home, sid) as s:
        s.append(ModeData(mode="ask"))
        s.append(ApprovalData(call_id="c9", tool="bash", target="x", decision="allowed"))
        allowed = ApprovalData("c10", "edit", "f", decision="allowed", scope="session")
        s.append(allowed)
        for n in range(12):  # pushes them into the verified prefix
            s.append(UserData(text=f"more {n}"))
    saved = home / sid / remembered.NAME
    with Session.open(home, sid) as s:
        assert remembered.recall(s) == ("ask", {"edit"})
        assert saved.exists()
        decoded.clear()
        assert remembered.recall(s) == ("ask", {"edit"})  # from the file: nothing folded
        assert len(decoded) <= 1, decoded  # the record it was folded through, to check it
        s.append(ModeData(mode="auto"))  # after the file: folded from the log
        assert remembered.recall(s) == ("auto", {"edit"})
    # A file that does not match the log (a forged one, or the log's other records after a
    # power cut): ignored, and the log read.
    forged = saved.read_text().replace('"always":["edit"]', '"always":["bash","edit"]')
    assert forged != saved.read_text()
    for damaged in (forged.replace('"digest":"', '"digest":"0'), "not json", ""):
        saved.write_text(damaged)
        with Session.open(home, sid) as s:
            assert remembered.recall(s) == ("auto", {"edit"}), damaged
    saved.unlink()
    os.symlink(short_tmp / "elsewhere.json", saved)
    (short_tmp / "elsewhere.json").write_text(forged)
    with pytest.raises(SessionRefused, match=r"acp-modes\.json is a symbolic link"):
        Session.open(home, sid)  # as any link in a session directory (kernel/store/guard.py)


def test_the_note_names_what_follows() -> None:
    def said(shown: history.Window) -> str:
        note = history.note(shown)
        assert note is not None
        return str(note.content.text)

    assert "the last 3 requests" in said(history.Window(40, 100, 3))
    assert "what follows is the last request." in said(history.Window(40, 100, 1))
    assert "the end of the last request" in said(history.Window(40, 100, 0))
    assert "records 1 to 40 of this session's 100" in said(history.Window(40, 100, 3))
    assert history.note(history.Window(1, 100, 3)) is None  # only the session record left out
