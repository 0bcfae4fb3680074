"""Every way an agent run ends writes exactly one `final`, with the status the run returns.

One embedded agent, one session, the models at the wire (loopback Jev and Flash servers) and a
real tool worker: each request below ends a different way (kernel/errors.py RunEnded).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from kernel.errors import UsageError
from protocol.events import FinalData, ToolStartedData
from tests.support.embed import build_agent

BAD_WRITE = {"tool_call": {"arguments": {"path": "x.txt", "file_text": 42, "bogus": 1}}}


@pytest.fixture
def agent(embed_env: Path, short_tmp: Path) -> Any:
    built = build_agent(short_tmp / "home", embed_env)
    try:
        yield built
    finally:
        built.close()


def ends(agent: Any, status: str, **run: Any) -> str:
    """Run once; exactly one new `final`, last in the log, matching what `run` returned."""
    before = len(agent.session.events)
    result = agent.run(**run)
    new = agent.session.events[before:]
    finals = [e.data for e in new if isinstance(e.data, FinalData)]
    assert [f.status for f in finals] == [status], [e.kind for e in new]
    assert new[-1].kind == "final"
    assert result["status"] == status and finals[0].summary == result["summary"]
    return str(result["summary"])


def no_final(agent: Any, status: str, **run: Any) -> None:
    """A replay or a compaction answers without a run: no `final` is written."""
    before = len(agent.session.events)
    assert agent.run(**run)["status"] == status
    assert not [e for e in agent.session.events[before:] if e.kind == "final"]


def cancel_once_running(agent: Any, fifo: Path) -> None:
    """Ctrl+C once the command says it runs (it writes a line into `fifo`)."""
    with fifo.open() as running:
        running.readline()
    agent.cancel.set()


def test_every_ending_writes_one_final(agent: Any, servers: tuple[Any, Any]) -> None:
    jev, flash = servers
    # completed after a recall (run by the kernel), then replayed without a new run
    jev.script([{"route": "recall"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"query": "hello"}}}, {"text": "hello"}])
    assert ends(agent, "completed", prompt="say hello") == "hello"
    (recalled,) = [e.data for e in agent.session.events if e.kind == "tool_finished"]
    assert recalled.tool == "recall" and recalled.status == "ok", recalled
    no_final(agent, "completed")
    # asked: the router picks `ask`; then a router too unsure to pick anything
    jev.script([{"route": "ask"}])
    flash.queue([{"text": "Which file?"}])
    assert ends(agent, "needs_input", prompt="fix it") == "Which file?"
    jev.script([{"route": {"done": 0.12}}])
    assert "below the floor" in ends(agent, "needs_input", prompt="hmm")
    # blocked by the completion review
    jev.script([{"route": "done"}, {"completion_review": "blocked"}])
    assert "judged the request blocked" in ends(agent, "blocked", prompt="cannot")
    # error: the router's answer breaks the API's rules
    jev.fault("answer", count=5, answer={"confidence": 5.0})
    assert "The route request failed" in ends(agent, "error", prompt="route")
    jev.clear_faults()
    # cancelled between steps, and cancelled while a command runs
    agent.cancel.set()
    assert ends(agent, "cancelled", prompt="stop") == "Cancelled by the user."
    agent.cancel.clear()
    fifo = agent.session.workspace / "started.fifo"
    os.mkfifo(fifo)
    ctrl_c = threading.Thread(target=cancel_once_running, args=(agent, fifo))
    ctrl_c.start()
    jev.script([{"route": "bash"}])
    flash.queue([{"tool_call": {"arguments": {"command": "echo up > started.fifo; sleep 30"}}}])
    # the command runs when Ctrl+C lands (it wrote into the FIFO): one `cancelled` final
    assert ends(agent, "cancelled", prompt="sleep").startswith("Cancelled by the user")
    ctrl_c.join()
    agent.cancel.clear()
    # the stopped command is a fact (`interrupted`): the next run is blocked on it until the
    # person acknowledges it, then goes on
    assert "unknown outcome" in ends(agent, "blocked", prompt="write x.txt")
    # blocked: three identical errors in a row
    jev.script([{"route": "write"}] * 3)
    flash.queue([BAD_WRITE] * 3)
    summary = ends(agent, "blocked", prompt="write x.txt", acknowledge_pending=True)
    assert "three times in a row" in summary
    jev.script([{"route": "recall"}] * 3)
    flash.queue([{"tool_call": {"arguments": {"path": "x"}}}] * 3)
    summary = ends(agent, "blocked", prompt="recall x")
    assert summary.endswith("arguments: recall: recall does not take path: use `query` or `seq`")
    # blocked on a call a kill left without an end, then acknowledged and completed
    agent.session.append(
        ToolStartedData(call_id="c0ffee", tool="bash", target="make", request="", arguments=""),
        durable=True,
    )
    assert "unknown outcome" in ends(agent, "blocked", prompt="go on")
    jev.script([{"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"text": "done"}])
    assert ends(agent, "completed", prompt="go on", acknowledge_pending=True) == "done"
    # refused before anything is recorded; a compaction writes no final
    before = len(agent.session.events)
    with pytest.raises(UsageError):
        agent.run(prompt="x" * 10_000_000)
    assert len(agent.session.events) == before
    no_final(agent, "compacted", compact=True)
