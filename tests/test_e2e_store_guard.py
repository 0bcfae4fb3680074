"""jmp's own files are out of reach of its file tools and of planted links (issue 9, 7/8/11).

Through the real CLI: a session dir inside the workspace (the default when jmp runs from its
checkout), scripted tool calls aimed at the running session's log, a log replaced under a
running session, and session dirs whose entries are links or FIFOs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.store import copied, make_template

template = pytest.fixture(scope="module")(make_template)


def inside_workspace(jmp: Cli) -> Cli:
    """Keep sessions at WORKSPACE/.jmp/sessions, like `jmp` run from its own checkout."""
    jmp.home = jmp.workspace / ".jmp" / "sessions"
    return jmp


def check_log(path: Path) -> list[dict]:
    """Every line a record, seq 1..n without gaps (the log was not forged or cut)."""
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    return records


@pytest.mark.timeout(300)  # one run with a tool worker, on a machine shared by many tests
def test_file_tools_refuse_paths_inside_the_sessions_dir(jmp: Cli, template: Path) -> None:
    inside_workspace(jmp)
    sid = copied(jmp, template)
    log = jmp.home / sid / "events.jsonl"
    (jmp.workspace / "mine").symlink_to(jmp.home / sid)  # links are resolved, not trusted
    edit = {
        "command": "str_replace",
        "path": f".jmp/sessions/{sid}/events.jsonl",
        "old_str": '"seq":1,',
        "new_str": '"seq":7,',
    }
    write = {"path": "mine/artifacts/planted.json", "file_text": "{}"}
    read = {"path": str(jmp.home / sid / "lock")}
    routes = [{"route": r} for r in ("edit", "write", "read", "done")]
    jmp.jev.script([*routes, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": a}} for a in (edit, write, read)])
    jmp.flash.queue([{"text": "left the log alone"}])
    before = log.read_bytes()
    out = jmp.run("--session", sid, "now edit your own log", timeout=240)
    assert out.code == 0, out.stderr
    errors = [e["message"] for e in out.of("error")]
    assert len(errors) == 3, errors
    assert all("sessions directory" in m for m in errors), errors
    assert not out.of("tool_started")
    assert not (jmp.home / sid / "artifacts" / "planted.json").exists()
    records = check_log(log)
    assert log.read_bytes().startswith(before)
    assert records[-1]["kind"] == "final" and records[-1]["data"]["status"] == "completed"


@pytest.mark.parametrize(
    ("command", "how"),
    [("mv events.jsonl x && cp x events.jsonl", "replaced"), ("rm events.jsonl", "removed")],
)
@pytest.mark.timeout(300)
def test_a_log_replaced_under_a_running_session_stops_the_run(
    jmp: Cli, template: Path, command: str, how: str
) -> None:
    sid = copied(jmp, template)
    directory = jmp.home / sid
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": f"cd {directory} && {command}"}}}])
    jmp.flash.queue([{"text": "should never be written"}])
    out = jmp.run("--session", sid, "touch your log", timeout=240)
    assert out.code == 2, out.stderr
    assert out.result["status"] == "error"
    assert how in out.result["summary"] and "events.jsonl" in out.result["summary"]
    assert "internal error" not in out.result["summary"]
    assert "tool_finished" not in out.kinds() and "final" not in out.kinds()
    # Nothing was written after the tool started, to either file.
    for path in (directory / "events.jsonl", directory / "x"):
        if path.exists():
            assert check_log(path)[-1]["kind"] == "tool_started"
    if how == "replaced":  # the next open sees the call without an end: honest, not forged
        again = jmp.run("--session", sid)
        assert again.result["status"] == "blocked", again.stdout
        assert [u["cause"] for u in again.of("tool_uncertain")] == ["kernel_exit"]


def plant(directory: Path, outside: Path, entry: str) -> Path:
    """Replace one entry of a session dir with a link; returns the link's target."""
    if entry == "artifacts":
        target = outside / "etc"
        target.mkdir()
        os.rename(directory / "artifacts", outside / "artifacts.moved")
    elif entry == "memory.sqlite3":
        target = outside / "history-copy.sqlite3"  # dangling: must never be created
        (directory / entry).unlink(missing_ok=True)
    elif entry == "artifacts/planted.json":
        target = outside / "bashrc"
        target.write_text("precious\n")
    else:
        target = outside / f"{entry}.target"
        target.write_bytes((directory / entry).read_bytes() if entry == "events.jsonl" else b"7\n")
        (directory / entry).unlink()
    (directory / entry).symlink_to(target)
    return target


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for dirs and links), links not followed."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        regular = path.is_file() and not path.is_symlink()
        found[str(path.relative_to(root))] = path.read_bytes() if regular else None
    return found


@pytest.mark.parametrize(
    ("entry", "prompt"),
    [
        ("artifacts", None),
        ("artifacts", "continue"),
        ("lock", None),
        ("events.jsonl", None),
        ("events.jsonl", "continue"),
        ("memory.sqlite3", "continue"),
        ("artifacts/planted.json", None),
    ],
)
def test_a_session_dir_holding_links_is_refused_and_nothing_written(
    jmp: Cli, template: Path, entry: str, prompt: str | None
) -> None:
    sid = copied(jmp, template)
    directory = jmp.home / sid
    outside = jmp.tmp / "outside"
    outside.mkdir()
    target = plant(directory, outside, entry)
    before, before_outside = snapshot(directory), snapshot(outside)
    out = jmp.run("--session", sid, *([prompt] if prompt else []), timeout=60)
    assert out.code == 2, out.stdout
    assert out.result["status"] == "error"
    summary = out.result["summary"]
    assert "symbolic link" in summary and entry in summary, summary
    assert snapshot(directory) == before and snapshot(outside) == before_outside
    if entry == "memory.sqlite3":
        assert not target.exists()


def test_a_session_dir_that_is_a_link_is_refused_but_a_linked_home_works(
    jmp: Cli, template: Path
) -> None:
    sid = copied(jmp, template)
    real_home = jmp.tmp / "real-home"
    jmp.home.rename(real_home)
    jmp.home.symlink_to(real_home)  # the user may keep sessions behind a link
    replay = jmp.run("--session", sid)
    assert replay.code == 0 and replay.result["summary"] == "first answer", replay.stdout
    (real_home / sid).rename(jmp.tmp / "moved")
    (real_home / sid).symlink_to(jmp.tmp / "moved")
    refused = jmp.run("--session", sid)
    assert refused.code == 2 and "symbolic link" in refused.result["summary"]
    listing = jmp.run("--list")
    rows = {row["session_id"]: row for row in listing.lines[-1]["data"]["sessions"]}
    assert rows[sid]["status"] == "unreadable"


@pytest.mark.timeout(60)
def test_list_and_open_never_hang_on_a_fifo_log(jmp: Cli, template: Path) -> None:
    sid = copied(jmp, template)
    fifo_id = "f" * 32
    (jmp.home / fifo_id).mkdir()
    os.mkfifo(jmp.home / fifo_id / "events.jsonl")
    linked_id = "e" * 32
    (jmp.home / linked_id).mkdir()
    (jmp.home / linked_id / "events.jsonl").symlink_to(jmp.home / sid / "events.jsonl")
    listing = jmp.run("--list", timeout=30)
    assert listing.code == 0, listing.stderr
    rows = {row["session_id"]: row for row in listing.lines[-1]["data"]["sessions"]}
    assert rows[sid]["status"] == "completed"
    assert rows[fifo_id]["status"] == "unreadable" and rows[linked_id]["status"] == "unreadable"
    opened = jmp.run("--session", fifo_id, timeout=30)
    assert opened.code == 2 and "FIFO" in opened.result["summary"], opened.stdout
