"""The power-cut simulator proves its model: what a cut keeps and loses, under each model's
rules for directory entries, by the image alone (fast) and through a real FUSE mount."""

from __future__ import annotations

import fcntl
import mmap
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.chaos.powercut.control import DiskError, LossyDisk, mounted
from jmp_lab.chaos.powercut.cut import take
from jmp_lab.chaos.powercut.model import MODELS, PAGE, Image
from tests.support.lossy import fsync, fuse, lossy_disk

# --- the image alone ------------------------------------------------------------------


class Files:
    """A toy process on an Image: keeps live bytes the way the backing directory would."""

    def __init__(self, model: str) -> None:
        self.image = Image(model)
        self.data: dict[int, bytearray] = {}

    def create(self, path: str, kind: str = "file") -> int:
        node = self.image.create(path, kind, 0o644)
        self.data[node] = bytearray()
        return node

    def write(self, path: str, data: bytes, offset: int | None = None) -> None:
        node = self.image.lookup(path)
        assert node is not None
        buf = self.data[node]
        at = len(buf) if offset is None else offset
        buf.extend(bytes(max(0, at - len(buf))))  # a write past the end leaves a hole of zeros
        buf[at : at + len(data)] = data
        self.image.write(node, at, len(data))

    def fsync(self, path: str) -> None:
        node = self.image.lookup(path)
        assert node is not None
        kind = self.image.nodes[node].kind
        self.image.sync(node, bytes(self.data[node]) if kind == "file" else None)

    def cut(self, data: str = "lose", dirs: str = "lose", seed: int = 0) -> dict[str, bytes]:
        report = take(self.image, random.Random(seed), data, dirs, self._live)
        return {e.path: e.data for e in report.entries if e.kind == "file"} | {
            e.path + "/": b"" for e in report.entries if e.kind == "dir"
        }

    def _live(self, node: int) -> bytes | None:
        return bytes(self.data[node]) if node in self.data else None


@pytest.mark.parametrize("model", MODELS)
def test_an_unsynced_write_vanishes_and_a_synced_one_survives(model: str) -> None:
    files = Files(model)
    files.create("/log")
    files.fsync("/")
    files.write("/log", b"first\n")
    files.fsync("/log")
    files.write("/log", b"second\n")
    assert files.cut() == {"/log": b"first\n"}


def test_strict_posix_a_file_fsync_does_not_name_it_and_a_directory_fsync_does() -> None:
    files = Files("strict")
    files.create("/d", "dir")
    files.create("/d/new")
    files.write("/d/new", b"data")
    files.fsync("/d/new")
    assert files.cut() == {}  # neither /d nor /d/new has a durable name
    files.fsync("/")
    assert files.cut() == {"/d/": b""}  # /d is named, its entries are not
    files.fsync("/d")
    assert files.cut() == {"/d/": b"", "/d/new": b"data"}


def test_strict_posix_an_unsynced_rename_is_undone() -> None:
    files = Files("strict")
    files.create("/tmp-1")
    files.write("/tmp-1", b"whole")
    files.fsync("/tmp-1")
    files.fsync("/")
    files.image.rename("/tmp-1", "/final")
    files.fsync("/final")  # the file's fsync: still only its data
    assert files.cut() == {"/tmp-1": b"whole"}
    files.fsync("/")
    assert files.cut() == {"/final": b"whole"}


def test_a_rename_over_a_file_keeps_the_old_one_until_the_directory_is_synced() -> None:
    files = Files("strict")
    files.create("/f")
    files.write("/f", b"old")
    files.fsync("/f")
    files.fsync("/")
    files.create("/.tmp")
    files.write("/.tmp", b"new")
    files.fsync("/.tmp")
    files.image.rename("/.tmp", "/f")
    assert files.cut() == {"/f": b"old"}
    files.fsync("/")
    assert files.cut() == {"/f": b"new"}


def test_name_model_a_files_fsync_names_it_and_nothing_else() -> None:
    files = Files("name")
    files.create("/a")
    files.create("/b")
    files.fsync("/a")
    assert files.cut() == {"/a": b""}
    files.image.rename("/a", "/c")
    files.fsync("/c")
    assert files.cut() == {"/c": b""}  # the move commits whole: no /a left behind


def test_name_model_a_directory_fsync_names_it_but_not_its_parent() -> None:
    files = Files("name")
    files.create("/top", "dir")
    files.create("/top/sub", "dir")
    files.create("/top/sub/f")
    files.fsync("/top/sub/f")
    assert files.cut() == {}  # /top itself was never named durably
    files.fsync("/top")
    assert files.cut() == {"/top/": b"", "/top/sub/": b"", "/top/sub/f": b""}


def test_journal_model_any_fsync_commits_every_earlier_directory_change() -> None:
    files = Files("journal")
    files.create("/d", "dir")
    files.create("/d/out")
    files.write("/d/out", b"not synced")
    files.create("/log")
    files.fsync("/log")
    files.create("/later")
    # names are durable up to the fsync; /d/out's data was never synced: an empty file
    assert files.cut() == {"/d/": b"", "/d/out": b"", "/log": b""}


def test_a_torn_append_keeps_a_prefix_at_a_byte_or_page_boundary() -> None:
    files = Files("journal")
    files.create("/log")
    files.write("/log", b"durable\n")
    files.fsync("/log")
    tail = bytes(range(256)) * 40  # 10,240 bytes over three pages
    files.write("/log", tail)
    kept_bytes, kept_pages = set(), set()
    for seed in range(40):
        data = files.cut("torn-byte", seed=seed)["/log"]
        assert data == (b"durable\n" + tail)[: len(data)] and len(data) >= 8
        kept_bytes.add(len(data))
        data = files.cut("torn-page", seed=seed)["/log"]
        assert data == (b"durable\n" + tail)[: len(data)]
        assert len(data) % PAGE == 0 or len(data) in (8, 8 + len(tail))
        kept_pages.add(len(data))
    assert len(kept_bytes) > 10
    assert {PAGE, 2 * PAGE} <= kept_pages <= {8, PAGE, 2 * PAGE, 8 + len(tail)}


def test_a_failed_fsync_forgets_the_written_pages_for_good() -> None:
    files = Files("strict")
    files.create("/log")
    files.fsync("/")
    files.write("/log", b"A" * 100)
    node = files.image.lookup("/log")
    assert node is not None
    files.image.sync_failed(node)
    files.write("/log", b"B" * 100, offset=PAGE)  # the next page
    files.fsync("/log")  # succeeds, as a retry would
    data = files.cut()["/log"]
    assert data == bytes(PAGE) + b"B" * 100  # page 0 was never written: it reads as zeros


def test_a_subset_of_unsynced_directory_operations_may_survive() -> None:
    seen: dict[str, set[frozenset[str]]] = {}
    for model in ("strict", "journal"):
        for seed in range(30):
            files = Files(model)
            for name in ("/a", "/b", "/c"):
                files.create(name)
            seen.setdefault(model, set()).add(frozenset(files.cut(dirs="subset", seed=seed)))
    assert frozenset({"/b"}) in seen["strict"]  # any subset
    assert seen["journal"] == {frozenset(x) for x in ([], ["/a"], ["/a", "/b"], ["/a", "/b", "/c"])}


def test_an_older_unsynced_op_never_undoes_a_newer_durable_entry() -> None:
    files = Files("name")
    files.create("/x")  # op 1: /x -> X (never committed by itself)
    files.image.rename("/x", "/y")  # op 2
    files.create("/x")  # op 3: /x -> Z
    files.fsync("/x")  # commits op 3 (Z's name)
    for seed in range(20):
        assert set(files.cut(dirs="subset", seed=seed)) in ({"/x"}, {"/x", "/y"})
        assert files.cut(dirs="subset", seed=seed)["/x"] == b""


# --- through a real FUSE mount ----------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[LossyDisk]:
    with lossy_disk(tmp_path, "strict") as lossy:
        yield lossy


@fuse
def test_through_fuse_a_cut_keeps_only_what_was_synced(disk: LossyDisk) -> None:
    mnt, backing = disk.mount, disk.backing
    (mnt / "kept").write_bytes(b"durable\n")
    with open(mnt / "kept", "ab") as out:  # O_APPEND through the mount
        out.write(b"synced append\n")
        out.flush()
        os.fsync(out.fileno())
        out.write(b"lost append\n")
    (mnt / "tmp").write_bytes(b"renamed, never synced")
    fsync(mnt / "tmp")
    fsync(mnt)
    os.rename(mnt / "tmp", mnt / "final")
    (mnt / "new").write_bytes(b"never named durably")
    assert (mnt / "kept").read_bytes().endswith(b"lost append\n")
    disk.freeze()
    report = disk.cut("lose", "lose", seed=1)
    assert sorted(os.listdir(backing)) == ["kept", "tmp"]
    assert (backing / "kept").read_bytes() == b"durable\nsynced append\n"
    assert (backing / "tmp").read_bytes() == b"renamed, never synced"
    assert "rename /tmp -> /final" in report["undone"]
    disk.start()  # power back: the image is what the mount shows
    assert sorted(os.listdir(disk.mount)) == ["kept", "tmp"]


@fuse
def test_through_fuse_a_torn_append_and_injected_eio_and_enospc(disk: LossyDisk) -> None:
    mnt = disk.mount
    disk.arm(
        [
            {"op": "fsync", "pattern": r"/eio$", "nth": 1, "action": "eio"},
            {"op": "write", "pattern": r"/full$", "nth": 2, "action": "enospc"},
        ]
    )
    fd = os.open(mnt / "eio", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    with pytest.raises(OSError) as failed:
        os.fsync(fd)
    assert failed.value.errno == 5
    os.fsync(fd)  # the retry succeeds, and the byte is not on the disk for it
    os.close(fd)
    with open(mnt / "full", "wb", buffering=0) as out:
        out.write(b"first")
        with pytest.raises(OSError) as full:
            out.write(b"second")
    assert full.value.errno == 28
    log = mnt / "log"
    log.write_bytes(b"line 1\n")
    fsync(log)
    fsync(mnt)
    with open(log, "ab") as out:
        out.write(b"line 2 is long enough to be torn somewhere in the middle\n")
    status = disk.status()
    assert [len(r["fired"]) for r in status["rules"]] == [1, 1]
    disk.freeze()
    disk.cut("torn-byte", "lose", seed=3)
    data = (disk.backing / "log").read_bytes()
    whole = b"line 1\nline 2 is long enough to be torn somewhere in the middle\n"
    assert whole.startswith(data) and len(data) >= 7
    assert "eio" not in os.listdir(disk.backing) or (disk.backing / "eio").read_bytes() != b"x"


@fuse
def test_through_fuse_a_removed_file_still_open_is_matched_by_the_path_it_had(
    disk: LossyDisk,
) -> None:
    """SQLite writes its -shm after unlinking it: a rule that spares memory.sqlite3 must
    spare that write too (at 34a55dc it matched as "?", and the campaign counted a cache's
    ENOSPC as a failed log write the run did not report)."""
    mnt = disk.mount
    disk.arm(
        [
            {"op": "write", "pattern": r"^(?!.*memory\.sqlite3)", "nth": 1, "action": "enospc"},
        ]
    )
    with open(mnt / "memory.sqlite3-shm", "wb", buffering=0) as shm:
        os.unlink(mnt / "memory.sqlite3-shm")
        shm.write(b"spared")
    with open(mnt / "gone", "wb", buffering=0) as gone:
        os.unlink(mnt / "gone")
        with pytest.raises(OSError) as full:
            gone.write(b"matched by the name it had")
    assert full.value.errno == 28
    [rule] = disk.status()["rules"]
    assert [w["path"] for w in rule["fired"]] == ["/gone (deleted)"]


@fuse
def test_through_fuse_a_failed_directory_sync_names_what_it_was_to_commit(
    disk: LossyDisk,
) -> None:
    """What a directory's fsync was there to make durable is in what fired (the campaign
    tells the recall cache's own entries from jmp's by it); a failed one keeps them pending,
    so a later successful one commits them."""
    mnt = disk.mount
    (mnt / "d").mkdir()
    fsync(mnt / "d")
    fsync(mnt)
    disk.arm([{"op": "fsync", "pattern": r"^/d$", "nth": 1, "action": "eio"}])
    (mnt / "d" / "b").write_bytes(b"")
    (mnt / "d" / "a").write_bytes(b"")
    (mnt / "d" / ".tmp-1").write_bytes(b"")  # renamed away before the sync: no change
    os.rename(mnt / "d" / ".tmp-1", mnt / "d" / "c")
    (mnt / "d" / ".tmp-2").write_bytes(b"")
    os.unlink(mnt / "d" / ".tmp-2")
    with pytest.raises(OSError) as failed:
        fsync(mnt / "d")
    assert failed.value.errno == 5
    [rule] = disk.status()["rules"]
    assert rule["fired"][0]["commits"] == ["a", "b", "c"]
    fsync(mnt / "d")  # the retry commits them
    disk.freeze()
    disk.cut("lose", "lose", seed=1)
    assert sorted(os.listdir(disk.backing / "d")) == ["a", "b", "c"]


@fuse
def test_through_fuse_locks_sqlite_mmap_and_a_frozen_disk(disk: LossyDisk) -> None:
    mnt = disk.mount
    # flock (jmp's session lock) and POSIX locks (SQLite's) are the kernel's, on this mount
    first = os.open(mnt / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    second = os.open(mnt / "lock", os.O_RDWR)
    fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with pytest.raises(BlockingIOError):
        fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(second)
    os.close(first)
    db = sqlite3.connect(mnt / "memory.sqlite3")
    db.execute("PRAGMA journal_mode=WAL")  # its -shm file is a shared writable mmap
    db.execute("CREATE TABLE t(x)")
    db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    db.commit()
    assert db.execute("SELECT count(*) FROM t").fetchone() == (100,)
    db.close()
    with open(mnt / "mapped", "wb") as out:
        out.write(bytes(PAGE))
    with open(mnt / "mapped", "r+b") as out:
        view = mmap.mmap(out.fileno(), PAGE)
        view[:5] = b"hello"
        view.flush()
        view.close()
    assert (mnt / "mapped").read_bytes()[:5] == b"hello"
    # frozen, a writer waits (it never finishes before the cut), even SIGKILLed: FUSE waits
    # out a request the daemon holds; the cut fails it (EIO) and takes nothing of it
    disk.freeze()
    script = f"open({str(mnt / 'late')!r}, 'w').write('late')"
    writer = subprocess.Popen([sys.executable, "-c", script])
    while not disk.status()["blocked"]:  # its lookup of `late` waits at the gate
        assert writer.poll() is None
        time.sleep(0.01)
    writer.kill()
    disk.cut("lose", "lose", seed=0)
    assert writer.wait() == -9
    assert "late" not in os.listdir(disk.backing)


@fuse
def test_through_fuse_a_disk_that_died_says_how_instead_of_a_closed_connection(
    disk: LossyDisk,
) -> None:
    """A daemon gone before the cut answered (here a SIGTERM ends its FUSE loop) is a
    DiskError naming its exit status and its log, not the control connection's EOFError
    (issue 38: a cut under load ended so, and said nothing of why)."""
    disk.freeze()
    assert disk.process is not None
    disk.process.send_signal(signal.SIGTERM)
    assert disk.process.wait() == 1
    with pytest.raises(DiskError) as failed:
        disk.cut("lose", "lose", seed=0)
    assert "went away during cut" in str(failed.value) and "exit status 1" in str(failed.value)
    assert "the FUSE loop ended abnormally" in str(failed.value)


@fuse
def test_through_fuse_a_cut_is_answered_when_the_fuse_loop_ends_during_it(
    disk: LossyDisk,
) -> None:
    """The FUSE loop may end with libfuse's error after the cut detached the mount: under load
    the kernel's teardown hands a worker ECONNABORTED for a request it had just taken (issue
    38's cut; a SIGTERM here ends the loop the same way, with the same RuntimeError: 8). The
    cut still answers, BACKING holds the durable image, and the daemon says it was the end of
    the mount it asked for: exit 0, no "abnormally". A stopped process holding a file keeps
    the lazily detached mount alive until then."""
    (disk.mount / "unsynced").write_bytes(b"never named durably")
    with (disk.mount / "unsynced").open("rb") as held:
        holder = subprocess.Popen(["sleep", "301.5"], stdin=held)
    try:
        os.kill(holder.pid, signal.SIGSTOP)  # it holds the file and cannot exit
        disk.freeze()
        answer: dict[str, object] = {}
        cut = threading.Thread(target=lambda: answer.update(disk.cut("lose", "lose", seed=0)))
        cut.start()
        while mounted(disk.mount):  # detached: the cut now waits for the loop to end
            time.sleep(0.01)
        assert disk.process is not None
        disk.process.send_signal(signal.SIGTERM)
        cut.join()
        assert answer["undone"] == ["create /unsynced"], answer
        assert os.listdir(disk.backing) == []
        assert disk.process.wait() == 0
        log = disk.log.read_text()
        assert "after this daemon had detached the mount" in log and "abnormally" not in log
    finally:
        holder.kill()
        holder.wait()


@fuse
def test_through_fuse_a_cut_whose_mount_does_not_end_is_refused_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that keeps a file open on the detached mount (here a stopped one; fusectl,
    which could abort the connection, is not mounted everywhere) keeps the FUSE loop alive:
    the cut is refused with the reason, and BACKING stays as processes left it, also once the
    holder is gone and the loop ends (before, the loop's end rewrote it after the refusal)."""
    monkeypatch.setenv("POWERCUT_UNMOUNT_WAIT_S", "0.5")  # the daemon's; refused after 3 s
    with lossy_disk(tmp_path, "strict") as disk:
        (disk.mount / "unsynced").write_bytes(b"never named durably")
        with (disk.mount / "unsynced").open("rb") as held:
            holder = subprocess.Popen(["sleep", "302.5"], stdin=held)
        try:
            os.kill(holder.pid, signal.SIGSTOP)
            abort = Path("/sys/fs/fuse/connections")
            if abort.is_dir() and any(abort.iterdir()):
                pytest.skip("fusectl is mounted here: the cut aborts the connection instead")
            disk.freeze()
            with pytest.raises(DiskError) as refused:
                disk.cut("lose", "lose", seed=0)
            assert "the disk refused cut" in str(refused.value)
            assert "the mount did not end within 3 s" in str(refused.value)
        finally:
            holder.kill()
            holder.wait()
        assert disk.process is not None
        assert disk.process.wait() == 0  # the loop ended once the holder was gone
        assert os.listdir(disk.backing) == ["unsynced"]
        assert (disk.backing / "unsynced").read_bytes() == b"never named durably"
