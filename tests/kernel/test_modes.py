"""A session is its owner's alone (issue 32, item 2), and staging dirs do not pile up (item 7).

Sessions are written by a child interpreter under a given umask (0, the widest, and 022, the
usual one): the home, every directory 0700 and every file 0600, the log, its index, a torn
tail's archive, an artifact, the recall index and SQLite's -wal/-shm among them. Then
`nobody` (setpriv) tries what the issue did at 623aa1b: read the log and the FTS index, and
flock the lock (a read-only descriptor is enough for flock) so that the owner's next run is
"in use by another process".
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel.store.session import Session
from kernel.store.staging import GRACE_S, sweep_staging
from tests.support.others import (
    loose_modes,
    needs_setpriv,
    nobody_locks,
    nobody_reads,
    reachable,
)
from tests.support.session import ROOT

WORD = "zebracrossing7"  # in the prompts, the tool output and so the FTS index

WRITE = r"""
import os, sys
from pathlib import Path
os.umask(int(sys.argv[3], 8))
from kernel.context.recall.index import RecallIndex
from kernel.store.session import Session
from protocol.events import UserData
home, ws, word = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[4]
with Session.create(home, ws) as s:
    for i in range(9):
        s.append(UserData(text=f"the prompt {word} {i}"))
    s.artifacts.write_text("out.txt", f"tool output {word}")
with open(s.directory / "events.jsonl", "ab") as f:
    f.write(b'{"torn')
with Session.open(home, s.id) as again:  # the torn tail archived
    index = RecallIndex.open_or_rebuild(s.directory / "memory.sqlite3")
    index.sync(again.events)
print(s.id, flush=True)
os._exit(0)  # as a kill leaves it: SQLite's -wal and -shm still there
"""


def write_session(home: Path, workspace: Path, umask: int) -> Path:
    env = dict(os.environ, JMP_LOG_INDEX_STRIDE="4", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", WRITE, str(home), str(workspace), f"{umask:o}", WORD],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return home / done.stdout.strip()


@pytest.fixture
def workspace(short_tmp: Path) -> Path:
    ws = short_tmp / "ws"
    ws.mkdir()
    return ws


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_every_file_of_a_new_session_is_the_owners_alone(
    short_tmp: Path, workspace: Path, umask: int
) -> None:
    home = short_tmp / "jmp" / "sessions"  # made by jmp, with its parent
    directory = write_session(home, workspace, umask)
    names = {p.name for p in directory.iterdir()}
    for name in ("events.jsonl", "events.index", "lock", "memory.sqlite3", "memory.sqlite3-wal"):
        assert name in names, f"{name} was not written: the check would mean less"
    assert any(n.startswith("events.jsonl.torn-") for n in names), names
    assert loose_modes(short_tmp / "jmp") == []


@needs_setpriv
@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_another_user_can_neither_read_a_session_nor_lock_it(
    short_tmp: Path, workspace: Path, umask: int
) -> None:
    home = short_tmp / "sessions"
    directory = write_session(home, workspace, umask)
    reachable(short_tmp)  # only jmp's own modes stand between nobody and the session
    index = ("memory.sqlite3", "memory.sqlite3-wal")  # the FTS pages: in one or the other
    assert WORD.encode() in (directory / "events.jsonl").read_bytes()
    assert WORD.encode() in b"".join((directory / name).read_bytes() for name in index)
    for name in ("events.jsonl", "events.index", *index, "memory.sqlite3-shm"):
        assert nobody_reads(directory / name) is None, f"nobody read {name}"
    assert nobody_reads(directory / "artifacts" / "out.txt") is None
    assert not nobody_locks(directory / "lock"), "nobody could flock the session's lock"
    # even with the sessions home opened to everyone, the session dir itself stops nobody
    home.chmod(0o755)
    assert nobody_reads(directory / "events.jsonl") is None
    assert not nobody_locks(directory / "lock")
    # and with the session dir opened too, each file's own 0600 does (flock needs an open fd)
    directory.chmod(0o755)
    assert nobody_reads(directory / "events.jsonl") is None
    assert not nobody_locks(directory / "lock"), "a read-only descriptor of lock was had"
    with Session.open(home, directory.name):  # and the owner's next run is never refused
        pass


def widen(directory: Path) -> None:
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)


def test_a_session_written_wide_is_tightened_on_open_and_said_once(
    short_tmp: Path, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    home = short_tmp / "sessions"
    directory = write_session(home, workspace, 0o022)
    widen(directory)  # as 623aa1b left it (0755, 0644), and wider
    capfd.readouterr()
    with Session.open(home, directory.name):
        pass
    said = capfd.readouterr().err
    assert f"session {directory.name} was open to other users" in said, said
    assert "events.jsonl 0644 -> 0600" in said and ". 0777 -> 0700" in said, said
    assert loose_modes(directory) == []
    with Session.open(home, directory.name):
        pass
    assert "open to other users" not in capfd.readouterr().err  # once: nothing left to say


def test_a_session_dir_kept_0700_has_its_artifacts_left_unwalked(
    short_tmp: Path, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The session dir's mode gates the walk of artifacts/ (open must not stat each one)."""
    home = short_tmp / "sessions"
    directory = write_session(home, workspace, 0o022)
    (directory / "artifacts" / "out.txt").chmod(0o644)  # behind a 0700 dir: unreachable
    (directory / "events.jsonl").chmod(0o644)
    capfd.readouterr()
    with Session.open(home, directory.name):
        pass
    said = capfd.readouterr().err
    assert "events.jsonl 0644 -> 0600" in said and "out.txt" not in said, said


# --- staging dirs (item 7) ----------------------------------------------------------------

EMFILE = r"""
import os, resource, sys
from pathlib import Path
from kernel.errors import StorageError
from kernel.store.session import Session
home, ws = Path(sys.argv[1]), Path(sys.argv[2])
Session.create(home, ws).close()  # every import done, the home made
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
failed = made = 0
for spare in range(12):
    fillers = []
    try:
        while True:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for fd in fillers[:spare]:
        os.close(fd)
    try:
        Session.create(home, ws).close()
        made += 1
    except (StorageError, OSError):
        failed += 1
    for fd in fillers[spare:]:
        os.close(fd)
print(failed, made + 1)
"""


def test_a_create_that_runs_out_of_descriptors_leaves_no_staging_dir(
    short_tmp: Path, workspace: Path
) -> None:
    home = short_tmp / "sessions"
    done = subprocess.run(
        [sys.executable, "-c", EMFILE, str(home), str(workspace)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    failed, made = map(int, done.stdout.split())
    assert failed > 0, "no create failed: the limit never bit"
    assert [p.name for p in home.iterdir() if p.name.startswith(".new-")] == []
    # a create that failed after its rename (the fsync of the home) is not listed either
    assert len(list(home.iterdir())) == made


HOLD = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def staging(home: Path, tag: str, *, lock: bool, age_s: float) -> Path:
    path = home / f".new-{tag * 32}"
    (path / "artifacts").mkdir(parents=True)
    if lock:
        (path / "lock").write_text("")
    when = time.time() - age_s
    for p in [*path.rglob("*"), path]:
        os.utime(p, (when, when))
    return path


def test_staging_dirs_nobody_holds_are_swept_and_a_live_ones_never(
    short_tmp: Path, workspace: Path
) -> None:
    home = short_tmp / "sessions"
    home.mkdir()
    old = GRACE_S * 10
    abandoned = staging(home, "a", lock=True, age_s=old)  # a create killed after its flock
    no_lock = staging(home, "b", lock=False, age_s=old)  # killed between mkdir and flock
    recent = staging(home, "c", lock=False, age_s=0)  # a create between mkdir and flock
    held = staging(home, "d", lock=True, age_s=old)  # a live create (or one stopped long)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(held / "lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with Session.create(home, workspace) as s:  # the sweep runs in every create
            pass
        left = sorted(p.name for p in home.iterdir())
        assert left == sorted([s.id, recent.name, held.name]), left
        assert not abandoned.exists() and not no_lock.exists()
        # the holder's lock is untouched: it still holds it
        fd = os.open(held / "lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
        assert holder.stdout is not None
        holder.stdout.close()
    assert sorted(sweep_staging(home, now=time.time() + old)) == sorted([recent.name, held.name])
