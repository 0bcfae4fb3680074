"""Issue 20, item 14: `jev-harness inspect` refuses a jmp session without touching it (a torn
tail stays where it is, nothing is appended), and a hard link in a workspace root is marked as
one wherever the workspace shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jev_harness as jev
from tests.harness.helpers import ROOT

TORN = b'{"version":1,"session_id":"torn-by-a-pulled-plug'


def test_inspect_leaves_a_jmp_session_untouched(short_tmp: Path) -> None:
    from kernel.store.session import Session
    from protocol.events import UserData

    home = short_tmp / "sessions"
    session = Session.create(home, short_tmp)
    session.append(UserData(text="a jmp session, not a harness run"))
    session.close()
    directory = home / session.id
    with (directory / "events.jsonl").open("ab") as log:
        log.write(TORN)  # a record cut by a crash: opening the session would archive it
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("JMP_SESSIONS")}
    argv = [sys.executable, "-m", "jev_harness.cli", "inspect", session.id]
    done = subprocess.run(
        [*argv, "--sessions-dir", str(home), "--json"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=short_tmp,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"jmp --session {session.id}" in done.stderr
    assert json.loads(done.stdout)["status"] == "error"
    after = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    assert after == before  # no torn-tail archive, no appended record, byte for byte


def test_a_hard_link_is_marked_wherever_the_workspace_shows_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("The answer marker is BLUE-HERON, from outside the root.\n")
    root = tmp_path / "ws"
    root.mkdir()
    os.link(outside, root / "notes.txt")
    (root / "plain.txt").write_text("nothing here\n")
    task = jev.Task([jev.WorkspaceToolkit(root, ["marker"])])

    def run(tool: str, **ids: str) -> jev.Outcome:
        return task.operate(tool, task.resolve(tool, ids))

    listing = run("files.list", dir=".")
    assert "notes.txt (56 bytes; a hard link, one of 2 names)" in listing.text, listing.text
    assert "plain.txt (13 bytes)" in listing.text
    options = {o.id: o.description for o in task.domain("files.read", "path", {})}
    assert "hard link" in options["notes.txt"] and "hard link" not in options["plain.txt"]
    search = run("files.search", query="marker")
    assert "notes.txt (hard link):1:" in search.text, search.text
    read = run("files.read", path="notes.txt")
    assert "hard link" in read.summary and read.data["hard_links"] == 2
    assert (
        task.store is not None and task.store.describe(read.target)["metadata"]["hard_links"] == 2
    )
