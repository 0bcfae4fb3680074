"""The kernel's front-end seams (issue 24 items 2-3): `approve(call)` before each effect, and the
answer's text as it streams (`on_answer`), through the Python boundary with the models at the
wire and a real tool worker. Without them a run is the CLI's (tests everywhere else)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel.loop.approval import Approval, ProposedCall
from tests.support.embed import build_agent

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def build(embed_env: Path, short_tmp: Path) -> Any:
    made: list[Any] = []

    def agent(**hooks: Any) -> Any:
        built = build_agent(short_tmp / "home", embed_env, **hooks)
        made.append(built)
        return built

    try:
        yield agent
    finally:
        for built in made:
            built.close()


def kinds(agent: Any) -> list[str]:
    return [e.kind for e in agent.session.events]


def test_a_rejection_is_recorded_first_runs_nothing_and_reaches_the_router(
    build: Any, servers: tuple[Any, Any]
) -> None:
    jev, flash = servers
    asked: list[ProposedCall] = []
    answers = iter([Approval("rejected"), Approval("allowed", scope="session")])

    def approve(call: ProposedCall) -> Approval | None:
        asked.append(call)
        return next(answers)

    agent = build(approve=approve)
    jev.script(
        [
            {"route": "read"},  # observes: never asked
            {"route": "write"},
            {"route": "bash"},
            {"route": "done"},
            {"completion_review": "complete"},
        ]
    )
    flash.queue(
        [
            {"tool_call": {"arguments": {"command": "view", "path": str(agent.session.workspace)}}},
            {"tool_call": {"arguments": {"path": "no.txt", "file_text": "never\n"}}},
            {"tool_call": {"arguments": {"command": "echo yes > yes.txt"}}},
            {"text": "Done."},
        ]
    )
    assert agent.run(prompt="write, then run")["status"] == "completed"
    workspace = agent.session.workspace
    assert [(c.tool, c.target) for c in asked] == [
        ("write", str(workspace / "no.txt")),
        ("bash", "echo yes > yes.txt"),
    ]
    assert not (workspace / "no.txt").exists() and (workspace / "yes.txt").exists()
    events = agent.session.events
    approvals = [e for e in events if e.kind == "approval"]
    assert [(a.data.tool, a.data.decision, a.data.scope) for a in approvals] == [
        ("write", "rejected", "once"),
        ("bash", "allowed", "session"),
    ]
    started = {e.data.call_id: e.seq for e in events if e.kind == "tool_started"}
    assert approvals[0].data.call_id not in started  # rejected: never started
    assert started[approvals[1].data.call_id] == approvals[1].seq + 1  # recorded right before
    # The router's next state after the rejection says it, as a fact.
    state = jev.systemone_bodies()[2]["state"]
    assert "rejected by the user before it ran" in state and "no.txt" in state


def test_a_cancel_while_asked_starts_nothing(build: Any, servers: tuple[Any, Any]) -> None:
    jev, flash = servers

    def approve(call: ProposedCall) -> Approval:
        agent.cancel.set()  # the person cancels the turn while the question is open
        return Approval("cancelled")

    agent = build(approve=approve)
    jev.script([{"route": "bash"}])
    flash.queue([{"tool_call": {"arguments": {"command": "touch never.txt"}}}])
    assert agent.run(prompt="run it")["status"] == "cancelled"
    assert "tool_started" not in kinds(agent)
    assert [e.data.decision for e in agent.session.events if e.kind == "approval"] == ["cancelled"]
    assert not (agent.session.workspace / "never.txt").exists()
    from kernel.store.pending import unsettled

    assert unsettled(agent.session.events) == []  # nothing uncertain: nothing started


def test_the_answer_streams_to_on_answer_and_never_an_argument(
    build: Any, servers: tuple[Any, Any]
) -> None:
    jev, flash = servers
    pieces: list[tuple[int, str]] = []
    agent = build(on_answer=lambda offset, text: pieces.append((offset, text)))
    answer = "Streaming words, one after another. " * 5  # 23 chunks of 8 characters
    jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.fault("slow", count=2, seconds=0.15)  # per chunk: Progress goes every 0.1 s
    flash.queue([{"tool_call": {"arguments": {"command": "echo argument-text"}}}, {"text": answer}])
    assert agent.run(prompt="stream")["summary"] == answer.strip()
    assert len(pieces) > 1, pieces  # in pieces, as it was generated
    offset = 0
    for at, text in pieces:
        assert at == offset
        offset += len(text)
    assert answer.startswith("".join(text for _, text in pieces))
    assert "argument-text" not in "".join(text for _, text in pieces)
    progress = [e for e in agent.session.events if e.kind == "model_progress"]
    assert not progress  # transient: never persisted, and it carries counts only


def test_a_cancel_before_the_request_left_records_that_nothing_ran(
    build: Any, servers: tuple[Any, Any]
) -> None:
    """Issue 24 item 1: a cancel between `tool_started` and the request's sending (an editor's
    stop right as the call appears) left a call with no end, later told as "jmp itself was
    stopped during it"; nothing had run. Its end now says so, and nothing is uncertain."""
    from kernel.store.pending import unsettled

    jev, flash = servers
    agent = build()
    agent.session.on_event = lambda e: e.kind == "tool_started" and agent.cancel.set()
    jev.script([{"route": "bash"}])
    flash.queue([{"tool_call": {"arguments": {"command": "touch never.txt"}}}])
    assert agent.run(prompt="run it")["status"] == "cancelled"
    (ended,) = [e.data for e in agent.session.events if e.kind == "tool_finished"]
    assert ended.status == "error" and "nothing ran" in ended.text
    assert unsettled(agent.session.events) == []
    assert not (agent.session.workspace / "never.txt").exists()
