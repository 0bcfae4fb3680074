"""The run core under both loops (kernel/run/): one call leaves the same records whichever loop
decided it, and a harness run's router is the agent's slot (replaced when it dies).

The agent runs embedded (the Python boundary), the harness through `open_session`; both on the
suite's warm pool, against the loopback model servers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

import main
from jev_harness.session import open_session
from kernel.run.ledger import PREVIEW_CHARS, Ledger, Outcome
from kernel.store.session import Session
from tests.harness.helpers import SCRIPTS
from tests.support.workers import KillAt, worker_of

PICK = SCRIPTS / "pick_task.py"
KEY = "sk-ledger-" + "k" * 30  # a token format: redacted wherever it appears


@pytest.fixture
def env(embed_env: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path) -> Path:
    monkeypatch.chdir(short_tmp)  # a harness session's workspace is the working directory
    return embed_env


def _call_records(session_dir: Path) -> dict[str, Any]:
    """The one call of a session: its records' data by kind, and its request artifact."""
    events = [json.loads(line) for line in (session_dir / "events.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["kind"].startswith("tool_")]
    assert [e["kind"] for e in calls] == ["tool_started", "tool_finished"], calls
    started, finished = (e["data"] for e in calls)
    request = json.loads((session_dir / started["request"]).read_text())
    return {"started": started, "finished": finished, "request": request}


def _shape(record: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between the loops: each record's fields with their value's type
    (None and a number both count as "maybe a number": a shell has an exit code, an operation
    none), how the call id and the artifacts are named, the request artifact's fields, and
    what a preview is made of."""

    def kind(value: Any) -> str:
        return (
            "number?" if value is None or isinstance(value, int | float) else type(value).__name__
        )

    started, finished, request = record["started"], record["finished"], record["request"]
    call = started["call_id"]
    return {
        "started": {k: kind(v) for k, v in started.items()},
        "finished": {k: kind(v) for k, v in finished.items()},
        "call_id": bool(re.fullmatch(r"[0-9a-f]{16}", call)),
        "same call": finished["call_id"] == call == request["call_id"],
        "request": (started["request"] == f"artifacts/{call}.request.json", sorted(request)),
        "result": finished["artifact"] == f"artifacts/{call}.result.json",
        "output": finished["full_output"] == f"artifacts/{call}.output.txt",
        "arguments": started["arguments"]
        == finished["arguments"]
        == json.dumps(request["arguments"], ensure_ascii=False),
        "target": started["target"] == finished["target"] == request["target"],
        "tool": started["tool"] == finished["tool"] == request["tool"],
    }


def test_one_call_through_each_loop_leaves_records_of_the_same_shape(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    jev, flash = servers
    home = short_tmp / "sessions"
    # The agent loop: Jev routes bash, Flash writes the command.
    jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"command": "echo hi"}}}, {"text": "ran it"}])
    session = main.Session.create(home, env)
    models = main.Models(session, main.Settings.environment())
    tools = main.Tools(env, session.directory / "terminal", None)
    agent = main.Agent(session, models, tools, instructions=main.instructions())
    try:
        assert agent.run(prompt="say hi")["status"] == "completed"
    finally:
        agent.close()
    # The harness loop: the one tool is chosen in code, Jev picks its parameter.
    jev.script([{"items.pick.item": "b"}])
    with open_session(PICK, "pick b", {"items": ["a", "b"], "target": "b"}, sessions_dir=home) as s:
        assert s.delegate()["status"] == "completed"
        harness_dir = Path(s.directory)
    agent_call = _call_records(Path(session.directory))
    harness_call = _call_records(harness_dir)
    assert _shape(agent_call) == _shape(harness_call)
    assert all(v for k, v in _shape(harness_call).items() if k not in ("started", "finished"))
    assert harness_call["request"]["arguments"] == {"item": "b"}


def test_a_router_killed_between_two_harness_decisions_is_replaced(
    env: Path, servers: tuple[Any, Any], short_tmp: Path
) -> None:
    """As in the agent loop (test_agent_boundary.py): a router found dead before a question is
    replaced, nothing was in flight, so the run goes on; it used to end `error` (WorkerDied)."""
    jev, _flash = servers
    # pick a (Jev: the parameter), then the tool question (two tools offered), then pick c.
    jev.script([{"items.pick.item": "a"}, {"tool": "items.pick"}, {"items.pick.item": "c"}])
    killer = KillAt("router", lambda e: e.kind == "tool_finished")
    inputs = {"items": ["a", "b", "c"], "target": "c"}
    home = short_tmp / "sessions"
    with open_session(PICK, "pick c", inputs, sessions_dir=home) as s:
        killer.hook(s.session)
        result = s.delegate()
        assert len(killer.killed) == 1, killer.killed
        assert result["status"] == "completed", result
        assert worker_of("router").pid != killer.killed[0]
        events = list(s.session.events)
    assert [e.kind for e in events if e.kind == "error"] == []
    questions = [e.data.question for e in events if e.kind in ("route", "parameter")]
    assert questions == ["tool", "items.pick.item", "tool", "items.pick.item"]
    started = [e for e in events if e.kind == "model_started"]
    assert len(started) == 3 == len([e for e in events if e.kind == "usage"])  # Jev asked 3x
    picked = [e.data.target for e in events if e.kind == "tool_finished"]
    assert picked == ["item=a", "item=c"]


def test_a_preview_is_redacted_before_it_is_cut(short_tmp: Path) -> None:
    """A key that straddles the preview's cut is redacted whole: the ledger redacts, then cuts
    (the harness used to cut first, leaving a prefix of the key no redactor can match)."""
    (short_tmp / "ws").mkdir()
    session = Session.create(short_tmp / "home", short_tmp / "ws")
    try:
        ledger = Ledger(session)
        call = ledger.open("read", {"path": "x"}, "x")
        ledger.start(call)
        text = "o" * (PREVIEW_CHARS - 10) + KEY + " tail"
        ledger.finish(call, Outcome(status="ok", text=text, result={"text": text}))
        finished = session.events[-1].data
        assert finished.truncated and KEY[:10] not in finished.text
        assert finished.text.startswith("o" * (PREVIEW_CHARS - 10) + "[REDACTED]")
        assert "more characters in the full output]" in finished.text
        saved = (session.directory / finished.full_output).read_text()
        assert KEY not in saved and "[REDACTED] tail" in saved
    finally:
        session.close()


def test_the_result_record_is_redacted_and_names_its_fields(short_tmp: Path) -> None:
    (short_tmp / "ws").mkdir()
    session = Session.create(short_tmp / "home", short_tmp / "ws")
    try:
        ledger = Ledger(session)
        agent = ledger.end("completed", f"the key is {KEY}")
        assert set(agent.to_dict()) == {"session_id", "status", "summary", "session_dir"}
        assert agent.summary == "the key is [REDACTED]"
        harness = ledger.result("blocked", "x", artifact={"path": f"/r/{KEY}"})
        assert harness.to_dict()["artifact"] == {"path": "/r/[REDACTED]"}
        assert ledger.result("error", "y", artifact=None).to_dict()["artifact"] is None
        assert msgspec.json.decode(msgspec.json.encode(harness))["artifact"]["path"].endswith(
            "[REDACTED]"
        )
    finally:
        session.close()


def test_settle_records_each_open_call_once(short_tmp: Path) -> None:
    (short_tmp / "ws").mkdir()
    home = short_tmp / "home"
    session = Session.create(home, short_tmp / "ws")
    ledger = Ledger(session)
    call = ledger.open("bash", {"command": "make"}, "make")
    ledger.start(call)
    session.close()  # killed mid-call
    for _ in range(2):
        with Session.open(home, session.id) as again:
            waiting = Ledger(again).settle()
            assert [r.call_id for r in waiting] == [call.call_id]
    with Session.open(home, session.id) as again:
        uncertain = [e.data for e in again.events if e.kind == "tool_uncertain"]
        assert [(u.cause, u.acknowledged) for u in uncertain] == [("kernel_exit", False)]
        assert Ledger(again).settle(acknowledge=True) == []
        assert Ledger(again).settle() == []
