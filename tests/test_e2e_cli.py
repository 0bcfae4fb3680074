"""End-to-end: the real CLI, real workers, real files, loopback Jev and Flash servers."""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest

from tests.support.cli import FLASH_KEY, JEV_KEY, Cli, wait_for_line

WRITE = {"tool_call": {"arguments": {"path": "hello.py", "file_text": "print('hello')\n"}}}
RUN = {"tool_call": {"arguments": {"command": "python3 hello.py"}}}
EDIT = {
    "tool_call": {
        "arguments": {
            "command": "str_replace",
            "path": "hello.py",
            "old_str": "hello",
            "new_str": "world",
        }
    }
}


def test_multi_step_task_completes_and_changes_the_workspace(jmp: Cli) -> None:
    jmp.jev.script(
        [{"route": c} for c in ("write", "bash", "edit", "bash", "done")]
        + [{"completion_review": "complete"}]
    )
    jmp.flash.queue([WRITE, RUN, EDIT, RUN, {"text": "hello.py now prints world."}])
    out = jmp.task("make hello.py print world")
    assert out.code == 0, out.stderr
    assert out.result["status"] == "completed"
    assert out.result["summary"] == "hello.py now prints world."
    assert (jmp.workspace / "hello.py").read_text() == "print('world')\n"
    finished = out.of("tool_finished")
    assert [f["tool"] for f in finished] == ["write", "bash", "edit", "bash"]
    assert all(f["status"] == "ok" for f in finished)
    assert "hello" in finished[1]["text"] and "world" in finished[3]["text"]
    assert finished[3]["exit_code"] == 0
    # the log on disk is what was printed, seq +1 each, and holds no credential
    log = jmp.log(out.result["session_id"])
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    persisted = [line for line in out.lines if line["seq"] is not None]
    assert persisted == log
    raw = (jmp.home / out.result["session_id"] / "events.jsonl").read_text()
    for secret in (JEV_KEY, FLASH_KEY):
        assert secret not in raw and secret not in out.stdout and secret not in out.stderr
    # every generation request was forced to exactly one function
    tool_requests = [b for b in jmp.flash.completions() if b.get("tools")]
    assert len(tool_requests) == 4
    for body in tool_requests:
        assert [t["function"]["name"] for t in body["tools"]] == ["selected_action"]
        assert body["tool_choice"]["function"]["name"] == "selected_action"
        assert body["parallel_tool_calls"] is False and body["stream"] is True


def test_route_offers_exactly_the_tool_names(jmp: Cli) -> None:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "Hello!"}])
    out = jmp.task("say hello", "--no-mcp")
    assert out.code == 0, out.stderr
    bodies = jmp.jev.systemone_bodies()
    route = bodies[0]["questions"]["route"]
    assert route["type"] == "choice"
    assert sorted(route["criteria"]) == sorted(
        ["read", "write", "edit", "bash", "recall", "ask", "done"]
    )
    review = bodies[1]["questions"]["completion_review"]
    assert sorted(review["criteria"]) == ["blocked", "complete", "work_remains"]
    assert out.of("route")[0]["choice"] == "done"
    assert not out.of("tool_started")


def test_low_confidence_pauses_with_needs_input(jmp: Cli) -> None:
    spread = {"read": 0.2, "write": 0.2, "bash": 0.2, "edit": 0.1, "done": 0.1}
    jmp.jev.script([{"route": spread}])
    out = jmp.task("do something vague")
    assert out.code == 2
    assert out.result["status"] == "needs_input"
    assert out.of("route")[0]["confidence"] < 0.35
    assert not jmp.flash.completions()


def test_ask_pauses_with_a_question_from_flash(jmp: Cli) -> None:
    jmp.jev.script([{"route": "ask"}])
    jmp.flash.queue([{"text": "Which file should I change?"}])
    out = jmp.task("fix it")
    assert out.code == 2
    assert out.result["status"] == "needs_input"
    assert out.result["summary"] == "Which file should I change?"
    assert not jmp.flash.completions()[0].get("tools")


def test_work_remains_reroutes_without_done(jmp: Cli) -> None:
    jmp.jev.script(
        [
            {"route": "done"},
            {"completion_review": "work_remains"},
            {"route": "bash"},
            {"route": "done"},
            {"completion_review": "complete"},
        ]
    )
    jmp.flash.queue([{"tool_call": {"arguments": {"command": "echo ok"}}}, {"text": "ok"}])
    out = jmp.task("echo ok")
    assert out.code == 0, out.stderr
    routes = [b["questions"] for b in jmp.jev.systemone_bodies()]
    assert "done" in routes[0]["route"]["criteria"]
    assert "completion_review" in routes[1]
    assert "done" not in routes[2]["route"]["criteria"]
    assert "done" in routes[3]["route"]["criteria"]


def test_generation_500_leaves_no_tool_started_and_retry_completes(jmp: Cli) -> None:
    jmp.jev.script([{"route": "write"}])
    jmp.flash.fault("http500", count=10)
    out = jmp.task("write a file")
    assert out.code == 2
    assert out.result["status"] == "error"
    assert "tool_started" not in out.kinds()
    errors = out.of("error")
    assert errors and errors[-1]["stage"] == "generate"
    assert not (jmp.workspace / "hello.py").exists()
    jmp.flash.clear_faults()
    jmp.jev.script([{"route": "write"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([WRITE, {"text": "written"}])
    again = jmp.run("--session", out.result["session_id"])
    assert again.code == 0, again.stderr
    assert (jmp.workspace / "hello.py").exists()


def test_invalid_arguments_never_reach_a_tool(jmp: Cli) -> None:
    bad = {"tool_call": {"arguments": {"path": "x.txt", "file_text": 42, "bogus": 1}}}
    jmp.jev.script([{"route": "write"}] * 3)
    jmp.flash.queue([bad, bad, bad])
    out = jmp.task("write x.txt")
    assert out.code == 2
    assert out.result["status"] == "blocked"  # three identical errors in a row
    assert "tool_started" not in out.kinds()
    assert len(out.of("error")) == 3
    # each unusable answer still spent tokens: one usage record per generation call
    assert len([u for u in out.of("usage") if u["stage"] == "generate"]) == 3
    assert not (jmp.workspace / "x.txt").exists()


def test_replay_of_a_completed_session_calls_no_model(jmp: Cli) -> None:
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": "All done."}])
    out = jmp.task("hi")
    assert out.code == 0
    before = (len(jmp.jev.requests), len(jmp.flash.requests))
    env = jmp.env()
    del env["TYPESAFE_API_KEY"], env["FLASH_API_KEY"]
    replay = jmp.run("--session", out.result["session_id"], env=env)
    assert replay.code == 0, replay.stderr
    assert replay.result["summary"] == "All done."
    assert (len(jmp.jev.requests), len(jmp.flash.requests)) == before


def test_missing_key_is_named_and_creates_no_session(jmp: Cli) -> None:
    env = jmp.env()
    del env["FLASH_API_KEY"]
    out = jmp.task("anything", env=env)
    assert out.code == 2
    assert "FLASH_API_KEY" in out.stderr
    assert not jmp.home.exists() or not any(jmp.home.iterdir())


@pytest.mark.slow  # asserts a wall-clock bound
def test_ctrl_c_during_streaming_ends_cancelled_quickly(jmp: Cli) -> None:
    jmp.jev.script([{"route": "write"}])
    jmp.flash.fault("slow", count=1, seconds=2.0)
    jmp.flash.queue([WRITE])
    proc = jmp.start("--workspace", str(jmp.workspace), "write it")
    wait_for_line(proc, lambda line: line["kind"] == "model_progress")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    (*_, final) = wait_for_line(proc, lambda line: line["kind"] == "final", timeout=30)
    elapsed = time.monotonic() - sent  # the run has ended cancelled; workers still shut down
    stdout, _ = proc.communicate(timeout=30)
    lines = [json.loads(x) for x in stdout.splitlines() if x.strip()]
    assert proc.returncode == 2
    assert final["data"]["status"] == "cancelled"
    assert lines[-1]["kind"] == "result" and lines[-1]["data"]["status"] == "cancelled"
    assert elapsed < 1.0, elapsed
    assert not (jmp.workspace / "hello.py").exists()


def test_offload_skips_generation_for_fixed_schema_only(jmp: Cli) -> None:
    # `recall` is free-form: it needs one generation request.
    jmp.jev.script([{"route": "recall"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"query": "hello"}}}, {"text": "found"}])
    out = jmp.task("what did I say before?")
    assert out.code == 0, out.stderr
    assert len([b for b in jmp.flash.completions() if b.get("tools")]) == 1
    assert "argument_offload" not in out.kinds()


def _completed_session(jmp: Cli) -> str:
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": "echo needle-42"}}}, {"text": "ok"}])
    out = jmp.task("echo the needle")
    assert out.code == 0, out.stderr
    return str(out.result["session_id"])


def test_compact_is_local_deterministic_and_needs_no_key(jmp: Cli) -> None:
    session = _completed_session(jmp)
    before = (len(jmp.jev.requests), len(jmp.flash.requests))
    env = jmp.env()
    del env["TYPESAFE_API_KEY"], env["FLASH_API_KEY"]
    out = jmp.run("--session", session, "--compact", env=env)
    assert out.code == 0, out.stderr
    assert out.result["status"] == "compacted"
    assert (len(jmp.jev.requests), len(jmp.flash.requests)) == before
    compactions = out.of("compaction")
    assert {c["audience"] for c in compactions} == {"router", "generator"}
    # the same log gives byte-identical checkpoints: compact a copy of the session again
    copy = jmp.tmp / "copy"
    shutil.copytree(jmp.home / session, copy / session)
    for path in (copy / session).glob("context-*.json"):
        path.unlink()
    log = (copy / session / "events.jsonl").read_bytes().splitlines(keepends=True)
    (copy / session / "events.jsonl").write_bytes(b"".join(log[: -len(compactions)]))
    again = jmp.run("--session", session, "--compact", "--sessions-dir", str(copy), env=env)
    assert again.code == 0, again.stderr
    first = {p.name: p.read_bytes() for p in (jmp.home / session).glob("context-*.json")}
    second = {p.name: p.read_bytes() for p in (copy / session).glob("context-*.json")}
    assert first and first == second
    # the completed answer still replays after compaction
    replay = jmp.run("--session", session, env=env)
    assert replay.code == 0 and replay.result["summary"] == "ok"


def test_a_corrupt_recall_cache_does_not_stop_a_run(jmp: Cli) -> None:
    session = _completed_session(jmp)
    cache = jmp.home / session / "memory.sqlite3"
    cache.write_bytes(b"this is not a database" * 100)
    jmp.jev.script([{"route": "recall"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"query": "needle"}}}, {"text": "found it"}])
    out = jmp.run("--session", session, "what was the needle?")
    assert out.code == 0, out.stderr
    recall = [f for f in out.of("tool_finished") if f["tool"] == "recall"]
    assert recall and recall[0]["status"] == "ok"
    assert "needle-42" in recall[0]["text"]


def test_list_shows_sessions_with_status(jmp: Cli) -> None:
    session = _completed_session(jmp)
    out = jmp.run("--list")
    assert out.code == 0
    (line,) = out.lines
    assert line["kind"] == "sessions" and line["seq"] is None
    rows = {row["session_id"]: row for row in line["data"]["sessions"]}
    assert rows[session]["status"] == "completed"
