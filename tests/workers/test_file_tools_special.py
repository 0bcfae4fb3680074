"""The file tools and special files (issue 32 item 3), through the real tool worker on both
spawn paths (a worker forked by the suite's pool, and JMP_WARM=0): a FIFO, a device, a socket
or a symbolic link out of the workspace is refused with a tool error naming its type, and
nothing blocks; and what `write` and `edit` leave behind has the mode and owner a person's own
tools would give it (issue 37 item 2).

The device is `mknod null c 1 3` (as root; skipped otherwise): the check is by type, and a
regression must not read `/dev/zero` until the machine runs out of memory.
"""

from __future__ import annotations

import os
import socket
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.supervision.supervisor import WorkerFailed
from kernel.supervision.tools import Tools
from tests.support.warm import suite_pool
from tests.support.workers import close_within

# A bound on a regression's hang (the kernel stops the call after it), not a speed test.
CALL_LIMIT_S = 60.0


@pytest.fixture(params=["warm", "cold"])
def tools_of(
    request: pytest.FixtureRequest,
    short_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    warm_pool_of_this_session: Path,
) -> Iterator[Tools]:
    """A started tool worker on one spawn path, its workspace `short_tmp/ws`."""
    warm = request.param == "warm"
    monkeypatch.setenv("JMP_WARM", "1" if warm else "0")
    if warm:
        suite_pool(warm_pool_of_this_session)
    workspace = short_tmp / "ws"
    workspace.mkdir()
    tools = Tools(workspace, short_tmp / "terminal")
    try:
        yield tools
    finally:
        close_within(tools)


def call(tools: Tools, tool: str, **arguments: object):  # type: ignore[no-untyped-def]
    return tools.run(uuid.uuid4().hex, tool, dict(arguments), timeout_s=CALL_LIMIT_S)


def test_special_files_are_refused_by_type_and_nothing_blocks(tools_of: Tools) -> None:
    ws = tools_of.workspace
    outside = ws.parent / "outside.txt"
    outside.write_text("OUTSIDE-SECRET\n")
    os.mkfifo(ws / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(ws / "sock"))
    (ws / "out").symlink_to(outside)
    (ws / "real.txt").write_text("inside\n")
    (ws / "in").symlink_to(ws / "real.txt")
    tools_of.start()
    try:
        for name, kind in (("pipe", "fifo"), ("sock", "socket")):
            for tool, extra in (("read", {}), ("edit", {"command": "insert"})):
                args = {"insert_line": 0, "new_str": "x"} if tool == "edit" else {}
                result = call(tools_of, tool, path=name, **extra, **args)
                assert result.status == "error", (name, tool, result)
                assert f"is a {kind}" in result.error and name in result.error, result.error
        wrote = call(tools_of, "write", path="pipe", file_text="x")
        assert wrote.status == "error" and stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)
        with pytest.raises(WorkerFailed, match="outside the workspace") as refused:
            call(tools_of, "read", path="out")  # resolved, then refused before any effect
        assert "OUTSIDE-SECRET" not in str(refused.value)
        inside = call(tools_of, "read", path="in")  # a link inside: read as its target
        assert inside.status == "ok" and "inside" in inside.text, inside
        listed = call(tools_of, "read", path=".")
        assert listed.status == "ok" and "pipe" in listed.text, listed
    finally:
        listener.close()


def test_a_device_is_refused_by_type(tools_of: Tools) -> None:
    ws = tools_of.workspace
    try:
        os.mknod(ws / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD (run as root)")
    result = call(tools_of, "read", path="null")
    assert result.status == "error" and "is a device" in result.error, result
    edited = call(tools_of, "edit", command="str_replace", path="null", old_str="a", new_str="b")
    assert edited.status == "error" and "is a device" in edited.error, edited
    assert stat.S_ISCHR(os.lstat(ws / "null").st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_write_and_edit_give_the_modes_a_persons_tools_would(tools_of: Tools, mask: int) -> None:
    """A new file: 0666 less the umask of the kernel (the worker takes it on, warm or cold);
    an edited 0755 file stays 0755, and keeps its owner (as root)."""
    ws = tools_of.workspace
    script = ws / "run.sh"
    script.write_text("echo one\n")
    os.chmod(script, 0o755)
    owner = os.geteuid() == 0
    if owner:
        os.chown(script, 65534, 65534)
    saved = os.umask(mask)
    try:
        tools_of.start()  # spawned (or forked) under this umask
        tools_of.specs()  # ready
    finally:
        os.umask(saved)
    assert call(tools_of, "write", path="new.txt", file_text="hello\n").status == "ok"
    assert stat.S_IMODE(os.stat(ws / "new.txt").st_mode) == 0o666 & ~mask
    edited = call(
        tools_of, "edit", command="str_replace", path="run.sh", old_str="one", new_str="two"
    )
    assert edited.status == "ok", edited
    info = os.stat(script)
    assert script.read_text() == "echo two\n"
    assert stat.S_IMODE(info.st_mode) == 0o755
    if owner:
        assert (info.st_uid, info.st_gid) == (65534, 65534)


def _bytes_read(pid: int) -> int:
    """What process `pid` has read so far (rchar: every read(2), files and pipes alike)."""
    with open(f"/proc/{pid}/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def test_read_reads_at_most_the_cap_and_one_byte_of_a_big_file_or_a_device(
    tools_of: Tools,
) -> None:
    """Issue 32 item 3: the file tools read at most the cap (OpenHands' 10 MiB) and one byte.
    Before: `read` of a `.png` (OpenHands skips its size check for images) read it whole, 64
    MiB here (a sparse file: no disk used); a device is refused by type, unread."""
    ws = tools_of.workspace
    cap = 10 * 1024 * 1024
    size = 64 * 1024 * 1024
    for name in ("big.png", "big.txt"):
        with open(ws / name, "wb") as f:
            f.truncate(size)
    device = True
    try:
        os.mknod(ws / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        device = False  # mknod needs CAP_MKNOD: the files alone then
    tools_of.start()
    tools_of.specs()
    pid = tools_of.worker.pid
    assert pid is not None
    for name in ("big.png", "big.txt", *(["zero"] if device else [])):
        before = _bytes_read(pid)
        result = call(tools_of, "read", path=name)
        read = _bytes_read(pid) - before
        assert result.status == "error", (name, result)
        assert read <= cap + 1 + 65536, f"read of {name} read {read} bytes"  # + its messages
