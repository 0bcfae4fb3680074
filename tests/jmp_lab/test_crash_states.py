"""The crash-state explorer (jmp_lab/chaos/explore): every crash state of a trace under each
directory model; the trace a real mount records; the real build violating nothing in any
state of a one-call workload (one state recovered through the CLI with the history check);
each of the three broken builds caught with a reproducer; the history check itself."""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from jmp_lab.chaos.explore.cli import Explorer, _spread
from jmp_lab.chaos.explore.record import record
from jmp_lab.chaos.explore.states import Choice, Explored, State, enumerate_states
from jmp_lab.chaos.explore.verify import history, on_state, recover
from jmp_lab.chaos.explore.workloads import KINDS, named, workload
from jmp_lab.chaos.invoke import jmp_command
from jmp_lab.chaos.powercut.control import LossyDisk
from jmp_lab.chaos.powercut.cut import Entry
from jmp_lab.chaos.powercut.model import MODELS
from jmp_lab.chaos.powercut.trace import TracedImage, read_trace
from tests.support.lossy import fsync, fuse

# --- the enumeration, on a trace made by hand -------------------------------------------


def _trace() -> list[dict]:
    """/sessions (durable from the start); a: two lines appended, fsynced; b: one line,
    fsynced; then the directory's fsync."""
    out = io.BytesIO()
    image = TracedImage("strict", out)
    image.seed("/sessions", "dir", 0o700)
    live: dict[int, bytes] = {}
    for name, data in (("a", b"one\ntwo\n"), ("b", b"b\n")):
        node = image.create(f"/sessions/{name}", "file", 0o600)
        live[node] = b""
        for line in data.splitlines(keepends=True):
            image.write(node, len(live[node]), len(line), line)
            live[node] += line
        image.sync(node, live[node])
    image.sync(image.lookup("/sessions") or 0, None)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _states(model: str) -> tuple[list[State], Explored]:
    explored = Explored()
    return list(enumerate_states(_trace(), model, explored)), explored


def _names(state: State) -> dict[str, bytes]:
    return {p.removeprefix("/sessions/"): d for p, d in state.files().items()}


def test_each_model_leaves_the_states_its_rule_allows() -> None:
    by_model = {model: _states(model) for model in MODELS}
    for states, explored in by_model.values():
        assert explored.points == 4  # before each of the 3 fsyncs, and after the last
        assert explored.distinct == len(states) < explored.states  # deduplicated by content
    names = {m: [_names(s) for s in by_model[m][0]] for m in MODELS}
    # strict: before the directory's fsync any subset of the pending creates, b's without a's
    assert {"b": b"b\n"} in names["strict"] and {"a": b"one\ntwo\n"} in names["strict"]
    # name: a's fsync made its name durable; journal: any fsync made every earlier one so
    for model in ("name", "journal"):
        assert not any("b" in n and "a" not in n for n in names[model]), model
        assert {"b": b"b\n"} not in names[model]
    # before a's fsync: its appends torn at line ends, at 1 byte and 1 byte short, or lost
    first = {_names(s).get("a") for s in by_model["strict"][0] if s.choice.point == 4}
    assert first == {None, b"", b"o", b"one\n", b"one\ntwo", b"one\ntwo\n"}
    # after the last operation everything was synced: one state more, all of it
    assert {s.choice.before for s in by_model["journal"][0]} <= {
        "fsync file /sessions/a",
        "fsync file /sessions/b",
        "the end",
    }


def test_recoveries_take_each_log_content_first_then_the_rest() -> None:
    logs = [b"1\n", b"1\n", b"1\n", b"1\n2\n", b"1\n2\n", b"1\n2\n3\n"]
    states = [
        State(Choice(n, "fsync", 0.0), [Entry("/sessions/s/events.jsonl", "file", 0o600, log)], "")
        for n, log in enumerate(logs)
    ]
    order = _spread(states)
    assert sorted(s.choice.point for s in order) == list(range(len(logs)))
    assert {s.entries[0].data for s in order[:3]} == set(logs)  # one of each log first


def test_the_workloads_are_every_sequence_of_up_to_three_calls() -> None:
    names = [w.name for w in named(["cli-3"])]
    assert len(names) == len(set(names)) == 4 + 4**2 + 4**3
    assert {"bash", "mcp+write", "edit+bash+mcp"} <= set(names)
    session = named(["session", "bash@cold"])
    assert [w.compact for w in session] == [False, True, False, False]
    assert session[2].plan.kills and not session[3].plan.warm
    tools = {s.tool for w in named(["cli-1"]) for s in w.plan.steps()}
    assert tools == {"bash", "write", "edit", "mcp.witness"} and len(KINDS) == 4


def test_the_history_check_finds_a_call_run_twice_or_again() -> None:
    load = workload("bash+bash")
    first, second = (s.token for s in load.plan.steps())

    def event(kind: str, call: str, **data: object) -> dict:
        return {"kind": kind, "data": {"call_id": call, **data}}

    final = [
        event("tool_started", "c1", arguments={"command": first}),
        event("tool_finished", "c1", exit_code=0),
        event("tool_started", "c2", arguments={"command": second}),
        event("tool_uncertain", "c2", acknowledged=True),
    ]
    at_crash = [*final[:3], event("tool_uncertain", "c2", acknowledged=True)]
    ok = Counter({first: 1, second: 1})
    assert history(load.plan, ok, ok, at_crash, final) == []
    twice = history(load.plan, ok, Counter({first: 2, second: 1}), at_crash, final)
    assert twice == [f"history: finished call {first} took effect 2 times"]
    again = history(load.plan, Counter({first: 1}), ok, at_crash, final)
    assert f"history: acknowledged call {second} ran again" in again
    unnamed = history(load.plan, ok, ok, at_crash, final[:2])
    assert unnamed == [f"history: {second} took effect, no tool_started names it"]


# --- through a real mount ---------------------------------------------------------------


@fuse
def test_a_mount_traces_every_operation_with_its_process(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    disk = LossyDisk(tmp_path / "backing", tmp_path / "mnt", "strict", tmp_path / "st", trace)
    disk.start()
    try:
        home = disk.mount / "sessions"
        home.mkdir()
        with open(home / ".tmp", "wb") as out:
            out.write(b'{"kind":"session"}\n')
            out.flush()
            out.write(b'{"kind":"user"}\n')
            out.flush()
            os.fsync(out.fileno())
        os.rename(home / ".tmp", home / "log")
        fsync(home)
        (home / "gone").write_bytes(b"x")
        os.unlink(home / "gone")
    finally:
        disk.stop()
    events = list(read_trace(trace))
    ours = [e for e in events if e["pid"] == os.getpid()]
    said = [(e["op"], e.get("kind", ""), e.get("path"), e.get("offset")) for e in ours]
    assert said[:6] == [
        ("create", "dir", "/sessions", None),
        ("create", "file", "/sessions/.tmp", None),
        ("write", "", "/sessions/.tmp", 0),
        ("write", "", "/sessions/.tmp", 19),
        ("fsync", "file", "/sessions/.tmp", None),
        ("rename", "", "/sessions/log", None),
    ]
    assert ("fsync", "dir", "/sessions", None) in said and said[-1][0] == "remove"
    assert [e["serves"] for e in ours if e["op"] == "write"][:2] == [["session"], ["user"]]
    states = [s.files() for s in enumerate_states(events, "strict", Explored())]
    log = b'{"kind":"session"}\n{"kind":"user"}\n'
    assert {"/sessions/log": log} in states  # the end, as the replay of the trace has it
    assert {"/sessions/.tmp": log[:19]} in states  # its second line lost, the rename too


@pytest.fixture(scope="module")
def base() -> Path:
    path = Path(tempfile.mkdtemp(prefix="jcs", dir="/tmp"))  # ipc:// paths stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _warm(pool: Path, base: Path) -> Path:
    return pool if os.environ.get("JMP_WARM", "1").strip() != "0" else base / "cold-warm"


@fuse
@pytest.mark.timeout(600)
def test_no_state_of_a_one_call_workload_is_violated(
    base: Path, warm_pool_of_this_session: Path
) -> None:
    """Every distinct crash state of one bash call, under each model, checked on the disk;
    one recovered through the CLI: the call uncertain after the crash (its tool_started
    durable, its effect done, no tool_finished), acknowledged, not run again."""
    warm = _warm(warm_pool_of_this_session, base)
    rec = record(workload("bash"), base / "real", jmp_command(None), warm)
    assert rec.problems == [] and rec.session is not None
    assert {"write", "fsync", "rename", "create"} <= {e["op"] for e in rec.trace}
    uncertain = None
    for model in MODELS:
        explored = Explored()
        for state in enumerate_states(rec.trace, model, explored):
            assert on_state(state, rec) == [], (model, state.choice.describe())
            files = state.files()
            log = files.get(f"/sessions/{rec.session}/events.jsonl", b"")
            done = b'"tool_finished"' in log
            if b'"tool_started"' in log and not done and files.get("/ws/witness.log"):
                uncertain = uncertain or state
        assert explored.distinct > 50, (model, explored)
    assert uncertain is not None
    problems, figures = recover(uncertain, rec, base / "real", jmp_command(None), warm)
    assert problems == [], (problems, uncertain.choice.describe())
    assert figures["uncertain calls surfaced"] == 1 and figures["completions"] == 1


EXPECTED = {
    "log-fsync-noop": "printed-lost",
    "no-dir-fsync": "session-vanished",
    "artifact-after-record": "artifact-missing",
}


@fuse
@pytest.mark.timeout(600)
@pytest.mark.parametrize("broken", list(EXPECTED))
def test_a_broken_build_is_caught_with_its_smallest_state(
    broken: str, base: Path, warm_pool_of_this_session: Path
) -> None:
    warm = _warm(warm_pool_of_this_session, base)
    out = base / "found"
    explorer = Explorer(base / broken, jmp_command(None), warm, ("strict",), recover=False, out=out)
    rows = explorer.workload(workload("bash"), broken=broken)
    found = {cls for row in rows for cls in row.found}
    assert EXPECTED[broken] in found, [dict(r.violations) for r in rows]
    where = out / f"{broken}-bash-strict-{EXPECTED[broken]}"
    readme = (where / "README").read_text()
    assert f"--replay {where}" in readme and (where / "state").is_dir()
    assert (where / "trace.jsonl").exists() and json.loads((where / "recording.json").read_text())
