"""A session an earlier jmp wrote open to other users (0755 directories, 0644 files, as at
623aa1b) is tightened by the next `jmp --session ID`, which says so once on stderr and replays
as before (issue 32, item 2). A replay starts no worker: the check is cheap on every run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.others import loose_modes
from tests.support.store import copied, make_template

template = pytest.fixture(scope="module")(make_template)


def widen(directory: Path) -> None:
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_replay_tightens_a_session_written_open_and_says_so_once(
    jmp: Cli, template: Path
) -> None:
    sid = copied(jmp, template)
    directory = jmp.home / sid
    widen(directory)
    first = jmp.run("--session", sid)
    assert first.code == 0 and first.result["summary"] == "first answer", first.stderr
    notes = [line for line in first.stderr.splitlines() if "open to other users" in line]
    assert len(notes) == 1, first.stderr
    assert f"session {sid}" in notes[0] and "events.jsonl 0644 -> 0600" in notes[0], notes
    assert ". 0755 -> 0700" in notes[0] and "lock 0644 -> 0600" in notes[0], notes
    assert loose_modes(directory) == []
    again = jmp.run("--session", sid)
    assert again.code == 0 and "open to other users" not in again.stderr, again.stderr
