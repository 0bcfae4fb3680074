"""Black-box audit against CONTRACT.md: only the CLI, env vars, files and the loopback servers."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jmp_lab.servers import MCP_SERVER
from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import (
    DEEPSEEK_KEY,
    FLASH_KEY,
    JEV_KEY,
    ROOT,
    Cli,
    Run,
    inside,
    json_line,
    session_bytes,
    short_dir,
    tool_call,
)
from tests.support.contract import HEX32, REQUIRED, STAGES, TOOLS

REQUEST_1 = "Write notes.txt:  ünïcödé ✓, tabs\tand\nnew lines — keep them verbatim"
REQUEST_2_TAIL = "then run false until it stops, please"
REQUEST_2 = f"my key is {FLASH_KEY}; {REQUEST_2_TAIL}"
ANSWER_1 = "Finished: notes.txt written ✓."
JEV_BUDGET = 4000
FLASH_BUDGET = 20000
NOTE = f"UNIQUE_MARK {JEV_KEY}\n" + "lorem ipsum dolor sit amet\n" * 250


@dataclass
class Story:
    """A long session told once per module: two requests, replay, compaction, listing."""

    cli: Cli
    sid: str = ""
    first: Run | None = None
    second: Run | None = None
    replay: Run | None = None
    compact: Run | None = None
    listing: Run | None = None
    jev_first: list[Any] = field(default_factory=list)
    flash_first: list[Any] = field(default_factory=list)
    jev_second: list[Any] = field(default_factory=list)
    flash_second: list[Any] = field(default_factory=list)
    keyless_requests: int = -1
    checkpoint_twins: list[tuple[bytes, bytes]] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        return self.cli.home / self.sid

    def runs(self) -> list[Run]:
        return [
            r for r in (self.first, self.replay, self.compact, self.second) if r
        ]  # in time order

    def model_runs(self) -> list[Run]:
        return [r for r in (self.first, self.second) if r]


def _first_request(cli: Cli) -> Run:
    cli.jev.script(
        [{"route": r} for r in ("write", "bash", "bash", "read", "edit", "bash", "recall", "done")]
        + [{"completion_review": "complete"}]
    )
    cli.flash.queue(
        [
            tool_call(path="notes.txt", file_text=NOTE),
            tool_call(command="cat notes.txt; seq 1 3000"),
            tool_call(command="seq 1 6000"),
            tool_call(path="notes.txt"),
            tool_call(command="str_replace", path="notes.txt", old_str="UNIQUE_MARK", new_str="X"),
            tool_call(command="false"),
            tool_call(query="lorem"),
            {"text": ANSWER_1},
        ]
    )
    return cli.run("--workspace", str(cli.workspace), "--no-mcp", REQUEST_1)


def _keyless(cli: Cli, story: Story) -> None:
    env = cli.env(TYPESAFE_API_KEY=None, FLASH_API_KEY=None)
    before = cli.requests_seen()
    twin = cli.clone("twin")
    story.replay = cli.run("--session", story.sid, env=env)
    story.compact = cli.run("--session", story.sid, "--compact", env=env)
    twin_run = cli.run("--sessions-dir", str(twin), "--session", story.sid, "--compact", env=env)
    assert twin_run.code == 0, twin_run.stderr
    for path in sorted(story.directory.glob("context-*.json")):
        story.checkpoint_twins.append(
            (path.read_bytes(), (twin / story.sid / path.name).read_bytes())
        )
    story.listing = cli.run("--list", env=env)
    story.keyless_requests = cli.requests_seen() - before


def _second_request(cli: Cli, story: Story) -> Run:
    cli.jev.script([{"route": "bash"}] * 3)
    cli.flash.queue([tool_call(command="false")] * 3)
    return cli.run("--session", story.sid, REQUEST_2)


@pytest.fixture(scope="module")
def story() -> Iterator[Story]:
    tmp = short_dir()
    with JevServer() as jev, FlashServer() as flash:
        cli = Cli(tmp, jev, flash)
        cli.extra_env.update(
            JEV_CONTEXT_BYTES=str(JEV_BUDGET), FLASH_CONTEXT_BYTES=str(FLASH_BUDGET)
        )
        s = Story(cli)
        s.first = _first_request(cli)
        assert s.first.code == 0, s.first.stderr[-3000:]
        s.sid = s.first.result["session_id"]
        s.jev_first, s.flash_first = jev.systemone_bodies(), flash.completions()
        _keyless(cli, s)
        s.second = _second_request(cli, s)
        s.jev_second = jev.systemone_bodies()[len(s.jev_first) :]
        s.flash_second = flash.completions()[len(s.flash_first) :]
        yield s
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


# ---- section 3 and 5: stdout, envelope, kinds ---------------------------------------------


def test_first_request_completes_and_prints_a_result_last(story: Story) -> None:
    first = story.first
    assert first and first.code == 0 and first.result["status"] == "completed"
    assert first.result["summary"] == ANSWER_1
    assert Path(first.result["session_dir"]).resolve() == story.directory.resolve()
    for run in story.runs():
        assert run.lines[-1]["kind"] == "result" and run.lines[-1]["seq"] is None
        assert run.kinds().count("result") == 1
        assert set(run.result) >= {"session_id", "status", "summary", "session_dir"}


def test_envelope_seq_and_stdout_match_the_log(story: Story) -> None:
    log = story.cli.log(story.sid)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert log[0]["kind"] == "session"
    for event in log:
        assert event["version"] == 1 and event["session_id"] == story.sid
        assert HEX32.match(event["session_id"])
        assert isinstance(event["time"], float) and isinstance(event["data"], dict)
    printed = [ln for r in story.runs() for ln in r.lines if ln["seq"] is not None]
    assert printed == log  # every persisted event printed as written, and nothing else
    for run in story.runs():
        for line in run.lines:
            if line["seq"] is None:
                assert line["kind"] in ("model_progress", "result", "cleanup_warning")


def test_every_kind_has_the_contracts_fields(story: Story) -> None:
    lines = [ln for r in story.runs() for ln in r.lines if ln["kind"] in REQUIRED]
    seen = {ln["kind"] for ln in lines}
    assert seen >= {"session", "user", "run_started", "route", "model_started", "usage"}
    assert seen >= {"model_progress", "tool_started", "tool_finished", "compaction", "final"}
    for line in lines:
        missing = REQUIRED[line["kind"]] - set(line["data"])
        assert not missing, (line["kind"], missing)
    for started in story.first.of("run_started"):  # type: ignore[union-attr]
        assert started["thinking"] is False and "notes.txt" not in started["listing"]
    assert story.cli.log(story.sid)[0]["data"]["session_id"] == story.sid


def test_model_progress_is_transient_and_counts_only(story: Story) -> None:
    progress = [ln for r in story.model_runs() for ln in r.lines if ln["kind"] == "model_progress"]
    assert progress
    for line in progress:
        assert line["seq"] is None
        data = line["data"]
        assert isinstance(data["characters"], int) and data["characters"] >= 0
        assert set(data) <= {"stage", "characters", "model", "provider"}
        assert data["stage"] in STAGES
    assert all(e["kind"] != "model_progress" for e in story.cli.log(story.sid))


def test_stages_come_from_the_contracts_list(story: Story) -> None:
    for run in story.runs():
        for line in run.lines:
            if line["kind"] in ("model_started", "model_progress", "usage", "error"):
                assert line["data"]["stage"] in STAGES, line


def test_tool_finished_status_and_exit_codes(story: Story) -> None:
    finished = story.first.of("tool_finished")  # type: ignore[union-attr]
    assert [f["tool"] for f in finished] == [
        "write",
        "bash",
        "bash",
        "read",
        "edit",
        "bash",
        "recall",
    ]
    assert all(f["status"] in ("ok", "error") for f in finished)
    shells = [f for f in finished if f["tool"] == "bash"]
    assert [s["exit_code"] for s in shells] == [0, 0, 1]
    started = story.first.of("tool_started")  # type: ignore[union-attr]
    assert [s["call_id"] for s in started] == [f["call_id"] for f in finished]
    long_output = (story.directory / shells[1]["full_output"]).read_text()
    assert "\n6000" in long_output  # the full output is kept, whatever the preview holds
    assert (story.cli.workspace / "notes.txt").read_text().startswith("X ")


def test_event_paths_point_inside_the_session_and_exist(story: Story) -> None:
    paths = []
    for event in story.cli.log(story.sid):
        data = event["data"]
        keys = {"tool_started": ("request",), "tool_finished": ("artifact", "full_output")}
        keys["compaction"] = ("checkpoint",)
        paths += [data[k] for k in keys.get(event["kind"], ()) if data.get(k)]
    assert len(paths) >= 3 * 7 + 1
    for relative in paths:
        assert inside(story.directory, relative), relative
    assert (story.directory / "artifacts").is_dir()


# ---- section 6: secrets -------------------------------------------------------------------


def test_known_keys_never_leave_the_process(story: Story) -> None:
    stored = session_bytes(story.directory)
    outputs = "".join(r.stdout + r.stderr for r in story.runs())
    bodies = json.dumps([story.jev_first, story.flash_first, story.jev_second, story.flash_second])
    for secret in (JEV_KEY, FLASH_KEY):
        assert secret.encode() not in stored
        assert secret not in outputs and secret not in bodies
    db = story.directory / "memory.sqlite3"
    if db.exists():  # the recall cache is disposable, but must not hold keys either
        with sqlite3.connect(db) as conn:
            dump = "\n".join(conn.iterdump())
        assert JEV_KEY not in dump and FLASH_KEY not in dump


# ---- section 7: the two wire protocols ----------------------------------------------------


def test_route_offers_exactly_the_tool_names(story: Story) -> None:
    routes = [b for b in story.jev_first + story.jev_second if "route" in b["questions"]]
    assert len(routes) >= 9
    for body in routes:
        question = body["questions"]["route"]
        assert question["type"] == "choice"
        assert set(question["criteria"]) <= TOOLS and set(question["criteria"]) >= TOOLS - {"done"}
    assert set(routes[0]["questions"]["route"]["criteria"]) == TOOLS
    for route in story.first.of("route") + story.second.of("route"):  # type: ignore[union-attr]
        assert route["choice"] in TOOLS
        assert set(route["probabilities"]) <= TOOLS and route["choice"] in route["probabilities"]
        assert 0.0 <= route["confidence"] <= 1.0


def test_completion_review_asks_the_three_labels(story: Story) -> None:
    reviews = [b for b in story.jev_first if "completion_review" in b["questions"]]
    assert len(reviews) == 1
    question = reviews[0]["questions"]["completion_review"]
    assert question["type"] == "choice"
    assert set(question["criteria"]) == {"complete", "work_remains", "blocked"}


def test_generation_forces_one_streamed_function_without_thinking(story: Story) -> None:
    generate = [b for b in story.flash_first + story.flash_second if b.get("tools")]
    assert len(generate) == 7 + 3
    for body in generate:
        assert [t["function"]["name"] for t in body["tools"]] == ["selected_action"]
        assert body["tool_choice"] == {"type": "function", "function": {"name": "selected_action"}}
        assert body["parallel_tool_calls"] is False and body["stream"] is True
        assert body.get("thinking") == {"type": "disabled"}
    respond = [b for b in story.flash_first if not b.get("tools")]
    assert len(respond) == 1 and respond[0]["stream"] is True and "tool_choice" not in respond[0]
    assert respond[0].get("thinking") == {"type": "disabled"}


def test_tool_schemas_carry_the_contracts_parameters(story: Story) -> None:
    generate = [b for b in story.flash_first if b.get("tools")]
    props = [set(b["tools"][0]["function"]["parameters"].get("properties", {})) for b in generate]
    tools = [f["tool"] for f in story.first.of("tool_finished")]  # type: ignore[union-attr]
    want = {
        "read": {"path", "view_range"},
        "write": {"path", "file_text"},
        "edit": {"path", "old_str", "new_str", "insert_line"},
        "bash": {"command", "is_input", "timeout"},
    }
    for tool, got in zip(tools, props, strict=True):
        assert got >= want.get(tool, set()), (tool, got)
    assert {"query", "seq"} & props[-1]


# ---- section 9: context ------------------------------------------------------------------


def test_context_bytes_never_exceed_the_router_budget(story: Story) -> None:
    decisions = [
        ln["data"]
        for r in story.model_runs()
        for ln in r.lines
        if ln["kind"] in ("route", "completion_review")
    ]
    assert len(decisions) >= 10
    assert all(0 < d["context_bytes"] <= JEV_BUDGET for d in decisions)
    for body in story.jev_first + story.jev_second:
        state = body["state"] if isinstance(body["state"], str) else json.dumps(body["state"])
        assert len(state.encode("utf-8")) <= JEV_BUDGET


def test_flash_messages_stay_within_the_generator_budget(story: Story) -> None:
    for body in story.flash_first + story.flash_second:
        text = "".join(str(m.get("content") or "") for m in body["messages"])
        assert len(text.encode("utf-8")) <= FLASH_BUDGET


def test_every_request_reaches_both_models_verbatim(story: Story) -> None:
    for body in story.jev_first + story.jev_second:
        assert REQUEST_1 in body["state"]
    for body in story.flash_first + story.flash_second:
        assert any(REQUEST_1 in str(m.get("content") or "") for m in body["messages"])
    for body in story.jev_second:
        assert REQUEST_2_TAIL in body["state"] and ANSWER_1 in body["state"]
    for body in story.flash_second:
        contents = "".join(str(m.get("content") or "") for m in body["messages"])
        assert REQUEST_2_TAIL in contents and ANSWER_1 in contents
    users = [e["data"]["text"] for e in story.cli.log(story.sid) if e["kind"] == "user"]
    assert users[0] == REQUEST_1 and REQUEST_2_TAIL in users[1] and FLASH_KEY not in users[1]


# ---- sections 3, 6, 8: keyless commands, follow-up, identical errors -----------------------


def test_replay_compact_and_list_need_no_key_and_call_no_model(story: Story) -> None:
    assert story.keyless_requests == 0
    assert story.replay and story.replay.code == 0
    assert story.replay.result["status"] == "completed"
    assert story.replay.result["summary"] == ANSWER_1
    assert story.compact and story.compact.code == 0
    assert story.compact.result["status"] == "compacted"
    compactions = story.compact.of("compaction")
    assert compactions and all(c["through"] >= 1 for c in compactions)
    assert story.checkpoint_twins and all(a == b for a, b in story.checkpoint_twins)
    assert story.listing and story.listing.code == 0
    assert story.listing.kinds() == ["sessions"] and story.listing.lines[0]["seq"] is None


def test_three_identical_tool_errors_pause_the_follow_up(story: Story) -> None:
    second = story.second
    assert second and second.code == 2 and second.result["status"] == "blocked"
    finished = second.of("tool_finished")
    assert len(finished) == 3 and all(f["status"] == "error" for f in finished)
    assert second.of("final")[-1]["status"] == "blocked"


def test_list_shows_the_session(story: Story) -> None:
    assert story.listing
    sessions = story.listing.lines[0]["data"]["sessions"]
    assert [s["session_id"] for s in sessions] == [story.sid]


# ---- cheap runs: usage errors, settings, keys, failures, persistence ----------------------


@pytest.fixture(scope="module")
def models() -> Iterator[tuple[JevServer, FlashServer]]:
    with JevServer() as jev, FlashServer() as flash:
        yield jev, flash


@pytest.fixture
def cli(models: tuple[JevServer, FlashServer]) -> Iterator[Cli]:
    import shutil

    tmp = short_dir()
    jev, flash = models
    jev.state.steps.clear()
    jev.state.faults.clear()
    flash.state.items.clear()
    flash.state.faults.clear()
    yield Cli(tmp, jev, flash)
    shutil.rmtree(tmp, ignore_errors=True)


def _nothing_created(cli: Cli) -> bool:
    return not cli.home.exists() or not any(cli.home.iterdir())


def _done(cli: Cli, prompt: str = "say hi", *args: str, **kw: Any) -> Run:
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([{"text": "All done here."}])
    return cli.run(*args, prompt, **kw)


def _assert_refused(run: Run) -> None:
    assert run.code == 2, run.stdout + run.stderr
    assert run.lines and run.lines[-1]["kind"] == "result"
    assert run.lines[-1]["seq"] is None and run.result["status"] == "error"
    assert all(line["seq"] is None for line in run.lines)


USAGE_ERRORS = [
    [],
    ["--compact"],
    ["--ack-interrupted"],
    ["--list", "a task"],
    ["--list", "--session", "0" * 32],
    ["--session", "0" * 32, "follow-up"],
    ["--session", "../../etc"],
    ["   "],
    ["--no-such-flag", "a task"],
    ["--workspace", "/nonexistent/jmp-bb", "a task"],
    ["--session", "0" * 32, "--compact", "a prompt"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a) or "(nothing)")
def test_usage_errors_exit_2_create_nothing_and_print_json(cli: Cli, args: list[str]) -> None:
    before = cli.requests_seen()
    run = cli.run(*args)
    _assert_refused(run)
    assert run.stderr.strip()  # diagnostics go to stderr
    assert _nothing_created(cli) and cli.requests_seen() == before


def test_no_prompt_and_no_session_without_json_is_still_a_usage_error(cli: Cli) -> None:
    run = cli.run(json_flag=False)
    assert run.code == 2 and _nothing_created(cli) and run.stderr.strip()


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"JEV_CONTEXT_BYTES": "28001"}, "JEV_CONTEXT_BYTES"),
        ({"JEV_ARGUMENT_OFFLOAD": "bounded"}, "JEV_ARGUMENT_OFFLOAD"),
        ({"TYPESAFE_API_KEY": None}, "TYPESAFE_API_KEY"),
        ({"FLASH_API_KEY": None}, "FLASH_API_KEY"),
    ],
)
def test_settings_refused_before_any_session(
    cli: Cli, changes: dict[str, str | None], named: str
) -> None:
    before = cli.requests_seen()
    run = cli.run("--workspace", str(cli.workspace), "a task", env=cli.env(**changes))
    _assert_refused(run)
    assert named in run.stderr and named in run.result["summary"]
    assert _nothing_created(cli) and cli.requests_seen() == before


def test_router_budget_at_the_limit_is_accepted(cli: Cli) -> None:
    run = _done(cli, env=cli.env(JEV_CONTEXT_BYTES="28000"))
    assert run.code == 0, run.stderr
    assert all(r["context_bytes"] <= 28000 for r in run.of("route"))


def test_deepseek_key_stands_in_for_flash_key(cli: Cli) -> None:
    run = _done(cli, env=cli.env(FLASH_API_KEY=None, DEEPSEEK_API_KEY=DEEPSEEK_KEY))
    assert run.code == 0, run.stderr
    auth = [r["headers"].get("Authorization") for r in cli.flash.requests[-1:]]
    assert auth == [f"Bearer {DEEPSEEK_KEY}"]
    both = _done(cli, env=cli.env(DEEPSEEK_API_KEY=DEEPSEEK_KEY))
    assert both.code == 0, both.stderr
    assert cli.flash.requests[-1]["headers"].get("Authorization") == f"Bearer {FLASH_KEY}"
    for secret in (DEEPSEEK_KEY, FLASH_KEY, JEV_KEY):
        assert secret not in run.stdout + run.stderr + both.stdout + both.stderr


def test_failed_router_request_is_an_error_and_a_retry_continues(cli: Cli) -> None:
    cli.jev.fault("http500", count=20)
    run = cli.run("--workspace", str(cli.workspace), "say hi")
    assert run.code == 2 and run.result["status"] == "error"
    errors = run.of("error")
    assert errors and errors[-1]["stage"] == "route" and errors[-1]["error_class"]
    assert "tool_started" not in run.kinds()
    assert run.lines[-2]["kind"] == "final" and run.lines[-2]["data"]["status"] == "error"
    cli.jev.state.faults.clear()
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    again = cli.run("--session", run.result["session_id"])  # no prompt: retry inference
    assert again.code == 0 and again.result["status"] == "completed", again.stderr


def test_cut_generation_stream_never_runs_a_tool(cli: Cli) -> None:
    cli.jev.script([{"route": "write"}])
    cli.flash.queue([tool_call(path="cut.txt", file_text="partial " * 50)])
    cli.flash.fault("cut", after_chunks=4)
    run = cli.run("--workspace", str(cli.workspace), "write cut.txt")
    assert run.code == 2 and run.result["status"] == "error"
    assert "tool_started" not in run.kinds()
    assert run.of("error")[-1]["stage"] == "generate"
    assert not (cli.workspace / "cut.txt").exists()


@pytest.mark.parametrize(
    ("script", "status"),
    [
        ([{"route": "done"}, {"completion_review": "blocked"}], "blocked"),
        ([{"route": "ask"}], "needs_input"),
        ([{"route": {"read": 0.2, "write": 0.2, "bash": 0.2, "edit": 0.2}}], "needs_input"),
    ],
    ids=["review-blocked", "ask", "low-confidence"],
)
def test_pauses_exit_2(cli: Cli, script: list[dict[str, Any]], status: str) -> None:
    cli.jev.script(script)
    cli.flash.queue([{"text": "Which file?"}])
    run = cli.run("--workspace", str(cli.workspace), "--no-mcp", "do it")
    assert run.code == 2 and run.result["status"] == status, run.stderr
    assert run.of("final")[-1]["status"] == status
    assert "tool_started" not in run.kinds()


# ---- section 6: the log on disk -----------------------------------------------------------


@pytest.fixture
def done(cli: Cli) -> tuple[Cli, str]:
    """A completed session in `cli.home`."""
    run = _done(cli, "say hi", "--workspace", str(cli.workspace))
    assert run.code == 0, run.stderr
    return cli, run.result["session_id"]


def _keyless_env(cli: Cli, home: Path) -> dict[str, str]:
    return cli.env(TYPESAFE_API_KEY=None, FLASH_API_KEY=None, JMP_SESSIONS_DIR=str(home))


def test_torn_last_line_is_archived_with_an_error_event(done: tuple[Cli, str]) -> None:
    cli, sid = done
    home = cli.clone("torn")
    log = cli.log_path(sid, home)
    whole = log.read_bytes()
    torn = b'{"version":1,"session_id":"' + sid.encode() + b'","seq":99,"ti'
    log.write_bytes(whole + torn)
    run = cli.run("--session", sid, env=_keyless_env(cli, home))
    assert run.code == 0 and run.result["status"] == "completed", run.stderr
    errors = run.of("error")
    assert len(errors) == 1 and errors[0]["error_class"] and errors[0]["message"]
    assert errors[0]["stage"] in STAGES
    assert log.read_bytes().startswith(whole)
    events = cli.log(sid, home)  # every line parses again
    assert events[-1]["kind"] == "error" and events[-1]["seq"] == events[-2]["seq"] + 1
    archives = [p for p in log.parent.iterdir() if p.name.startswith("events.jsonl") and p != log]
    assert len(archives) == 1 and archives[0].read_bytes() == torn


@pytest.mark.parametrize("where", ["interior", "last-complete", "version-2", "seq-gap"])
def test_a_bad_complete_line_fails_visibly_and_writes_nothing(
    done: tuple[Cli, str], where: str
) -> None:
    cli, sid = done
    home = cli.clone(where)
    log = cli.log_path(sid, home)
    lines = log.read_text().splitlines(keepends=True)
    if where == "interior":
        lines[1] = '{"version": 1, "broken\n'
    elif where == "last-complete":
        lines.append("not json at all\n")
    else:
        last = json_line(lines[-1])  # a record: the --json lines' envelope and schema
        bump = 1 if where == "version-2" else 2
        last.update(seq=last["seq"] + bump, kind="user", data={"text": "x"})
        last["version"] = 2 if where == "version-2" else 1
        lines.append(json.dumps(last) + "\n")
    log.write_text("".join(lines))
    before = sorted((p.name, p.read_bytes()) for p in log.parent.iterdir() if p.is_file())
    run = cli.run("--session", sid, "continue", env=cli.env(JMP_SESSIONS_DIR=str(home)))
    _assert_refused(run)
    after = sorted((p.name, p.read_bytes()) for p in log.parent.iterdir() if p.is_file())
    assert [a for a in after if a[0] != "lock"] == [b for b in before if b[0] != "lock"]


def test_unknown_kinds_and_fields_are_ignored(done: tuple[Cli, str]) -> None:
    cli, sid = done
    home = cli.clone("unknown")
    cli.append(sid, home, "from_the_future", {"anything": [1, 2]}, extra_envelope_field=True)
    run = cli.run("--session", sid, env=_keyless_env(cli, home))
    assert run.code == 0 and run.result["summary"] == "All done here.", run.stderr


def _pending(cli: Cli, sid: str, home: Path, finished_exit: int | None) -> None:
    started = {"call_id": "bbpending01", "tool": "bash", "target": "touch effect.txt"}
    cli.append(sid, home, "tool_started", dict(started, request="artifacts/none.json"))
    if finished_exit is not None:
        cli.append(
            sid,
            home,
            "tool_finished",
            dict(started, status="ok", exit_code=finished_exit, text="", arguments=""),
        )


@pytest.mark.parametrize("finished_exit", [None, -1], ids=["pending", "unfinished-shell"])
def test_interrupted_call_blocks_until_acknowledged(
    done: tuple[Cli, str], finished_exit: int | None
) -> None:
    cli, sid = done
    home = cli.clone("pending")
    _pending(cli, sid, home, finished_exit)
    env = cli.env(JMP_SESSIONS_DIR=str(home))
    run = cli.run("--session", sid, "carry on", env=env)
    assert run.code == 2 and run.result["status"] == "blocked", run.stderr
    uncertain = run.of("tool_uncertain")
    assert [(u["call_id"], u["cause"], u["acknowledged"]) for u in uncertain] == [
        ("bbpending01", "kernel_exit", False)
    ]
    assert "tool_started" not in run.kinds()
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jev_before = len(cli.jev.systemone_bodies())
    ack = cli.run("--session", sid, "--ack-interrupted", env=env)
    assert ack.code == 0 and ack.result["status"] == "completed", ack.stderr
    acked = ack.of("tool_uncertain")
    assert [(u["call_id"], u["cause"], u["acknowledged"]) for u in acked] == [
        ("bbpending01", "kernel_exit", True)
    ]
    assert "tool_started" not in ack.kinds()  # nothing re-ran
    assert not (cli.workspace / "effect.txt").exists()
    state = cli.jev.systemone_bodies()[jev_before]["state"]
    assert "touch effect.txt" in state  # the uncertainty stays in context as a fact


def test_a_different_workspace_is_rejected(done: tuple[Cli, str]) -> None:
    cli, sid = done
    other = cli.tmp / "other"
    other.mkdir()
    before = cli.log_path(sid).read_bytes()
    run = cli.run("--session", sid, "--workspace", str(other), "more")
    _assert_refused(run)
    assert cli.log_path(sid).read_bytes() == before
    same = cli.run("--session", sid, "--workspace", str(cli.workspace), env=cli.env())
    assert same.code == 0 and same.result["status"] == "completed", same.stderr


def test_follow_up_without_a_key_names_it_and_writes_nothing(done: tuple[Cli, str]) -> None:
    cli, sid = done
    before = cli.log_path(sid).read_bytes()
    run = cli.run("--session", sid, "more", env=cli.env(TYPESAFE_API_KEY=None))
    _assert_refused(run)
    assert "TYPESAFE_API_KEY" in run.stderr
    assert cli.log_path(sid).read_bytes() == before


# ---- section 3: storage selection, console script, readable view --------------------------


def test_sessions_dir_flag_selects_storage(cli: Cli) -> None:
    chosen = cli.tmp / "chosen"
    run = _done(cli, "hi", "--sessions-dir", str(chosen), "--workspace", str(cli.workspace))
    assert run.code == 0, run.stderr
    assert (chosen / run.result["session_id"] / "events.jsonl").is_file()
    assert _nothing_created(cli)  # JMP_SESSIONS_DIR was not used


def test_default_storage_is_the_projects_jmp_sessions(cli: Cli) -> None:
    env = cli.env(JMP_SESSIONS_DIR=None)
    run = _done(cli, "hi", "--workspace", str(cli.workspace), env=env)
    assert run.code == 0, run.stderr
    directory = ROOT / ".jmp" / "sessions" / run.result["session_id"]
    try:
        assert (directory / "events.jsonl").is_file()
        listed = cli.run("--list", env=env, cwd=cli.tmp)
        ids = [s["session_id"] for s in listed.lines[0]["data"]["sessions"]]
        assert run.result["session_id"] in ids
    finally:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def test_console_script_is_the_same_cli(done: tuple[Cli, str]) -> None:
    cli, sid = done
    jmp = ROOT / ".venv" / "bin" / "jmp"
    assert os.access(jmp, os.X_OK)
    run = cli.exec([str(jmp), "--json", "--list"])
    assert run.code == 0 and run.kinds() == ["sessions"]
    assert [s["session_id"] for s in run.lines[0]["data"]["sessions"]] == [sid]
    replay = cli.exec([str(jmp), "--json", "--session", sid])
    assert replay.code == 0 and replay.result["summary"] == "All done here."


def test_without_json_the_answer_is_printed_readably(cli: Cli) -> None:
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([{"text": "Readable answer here."}])
    run = cli.run("--workspace", str(cli.workspace), "hi", json_flag=False)
    assert run.code == 0 and "Readable answer here." in run.stdout, run.stderr
    sid = next(p.name for p in cli.home.iterdir())
    replay = cli.run("--session", sid, json_flag=False)
    assert replay.code == 0 and "Readable answer here." in replay.stdout, replay.stderr


def test_json_help_keeps_stdout_json_only(cli: Cli) -> None:
    run = cli.run("--help")
    assert run.code == 0 and run.stdout == "" and "usage" in run.stderr


def test_every_missing_key_is_named(cli: Cli) -> None:
    env = cli.env(TYPESAFE_API_KEY=None, FLASH_API_KEY=None, DEEPSEEK_API_KEY=None)
    run = cli.run("--workspace", str(cli.workspace), "hi", env=env)
    assert run.code == 2
    assert "TYPESAFE_API_KEY" in run.stderr and "FLASH_API_KEY" in run.stderr
    assert _nothing_created(cli)


# ---- section 9: pinned intent that cannot fit ---------------------------------------------


def test_pinned_intent_that_cannot_fit_is_refused_and_trims_nothing(cli: Cli) -> None:
    """Issue 9 item 22: a request that can never fit the router's budget is refused before it
    is recorded (no session, no trimmed request sent), naming the setting."""
    prompt = "keep every byte of this request " * 60
    before = len(cli.jev.systemone_bodies())
    run = cli.run("--workspace", str(cli.workspace), prompt, env=cli.env(JEV_CONTEXT_BYTES="600"))
    assert run.code == 2 and run.result["status"] == "error", run.stderr
    assert run.result["session_id"] is None and "JEV_CONTEXT_BYTES" in run.stderr
    assert run.of("user") == []
    assert len(cli.jev.systemone_bodies()) == before  # no trimmed request was sent


# ---- sections 7 and 10: MCP names and argument offload -------------------------------------


def _mcp(cli: Cli) -> None:
    server = Path(MCP_SERVER)
    config = {"fake": {"command": sys.executable, "args": [str(server)]}}
    (cli.tmp / "mcp.json").write_text(json.dumps({"mcpServers": config}))


@pytest.mark.parametrize("policy", ["deterministic", "off"])
def test_offload_of_a_fixed_mcp_schema(cli: Cli, policy: str) -> None:
    _mcp(cli)
    cli.jev.script([{"route": "mcp.mode"}, {"route": "done"}, {"completion_review": "complete"}])
    before = len(cli.flash.completions())
    run = cli.run(
        "--workspace", str(cli.workspace), "set mode", env=cli.env(JEV_ARGUMENT_OFFLOAD=policy)
    )
    assert run.code == 0, run.stderr
    offered = set(run.of("route")[0]["probabilities"])
    assert offered >= TOOLS and "mcp.mode" in offered
    assert all(name in TOOLS or name.startswith("mcp.") for name in offered)
    generated = [b for b in cli.flash.completions()[before:] if b.get("tools")]
    offloads = run.of("argument_offload")
    if policy == "off":
        assert len(generated) == 1 and not offloads
    else:
        assert not generated and len(offloads) == 1
        assert offloads[0]["backend"] == "code" and offloads[0]["tool"] == "mcp.mode"
        assert offloads[0]["generation_call_skipped"] is True
        assert offloads[0]["flash_call_skipped"] is True
    assert [f["tool"] for f in run.of("tool_finished")] == ["mcp.mode"]


# ---- section 4 through the CLI: one writer; --list survives damage -------------------------


def test_a_second_writer_is_rejected_never_interleaved(done: tuple[Cli, str]) -> None:
    import subprocess

    cli, sid = done
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.fault("slow", seconds=0.4)
    cli.flash.queue([{"text": "the slow answer"}])
    argv = [sys.executable, str(ROOT / "main.py"), "--json", "--session", sid, "second"]
    first = subprocess.Popen(
        argv, cwd=cli.workspace, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert first.stdout is not None
        for raw in first.stdout:  # wait until the first writer is streaming
            if json_line(raw)["kind"] == "model_progress":
                break
        rival = cli.run("--session", sid, "third")
    finally:
        first.communicate(timeout=60)
    _assert_refused(rival)
    assert first.returncode == 0
    log = cli.log(sid)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert [e["data"]["text"] for e in log if e["kind"] == "user"] == ["say hi", "second"]


def test_list_survives_foreign_and_broken_entries(done: tuple[Cli, str]) -> None:
    cli, sid = done
    (cli.home / "not-a-session").mkdir()
    (cli.home / ("f" * 32)).mkdir()
    (cli.home / ("f" * 32) / "events.jsonl").write_text("garbage\n")
    run = cli.run("--list", env=cli.env(TYPESAFE_API_KEY=None, FLASH_API_KEY=None))
    assert run.code == 0 and run.kinds() == ["sessions"]
    ids = [s["session_id"] for s in run.lines[0]["data"]["sessions"]]
    assert ids[0] == sid and "not-a-session" not in ids
