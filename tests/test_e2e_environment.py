"""The environment fails, jmp says what and where (issue 9, items 15 and 19).

Read-only storage (a read-only bind mount in a private mount namespace, and an unprivileged
user on root's files), a full disk (a tiny tmpfs), an unreadable log, and the runtime dirs a
kill -9'd kernel leaves under /tmp. Root ignores file modes: the permission cases drop to
`nobody` through setpriv, the mount cases use `unshare -m`.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import psutil
import pytest

from tests.support.cli import Cli, Run, kill_group, wait_for_line
from tests.support.store import copied, make_template
from tests.support.warm import tree_of

template = pytest.fixture(scope="module")(make_template)

NOBODY = 65534
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
    reason="needs root with unshare and setpriv (to build read-only and full storage)",
)


def run_wrapped(jmp: Cli, wrapper: list[str], *args: str, timeout: float = 120) -> Run:
    """The CLI under a wrapper (unshare, setpriv) that execs `python main.py --json ARGS`."""
    env = jmp.env(PYTHONDONTWRITEBYTECODE="1")
    return jmp.exec([*wrapper, *jmp.argv(*args)], env=env, cwd=Path("/"), timeout=timeout)


def in_namespace(setup: str) -> list[str]:
    """sh -c SETUP, then exec the command, in a private mount namespace."""
    return ["unshare", "-m", "sh", "-ec", f'{setup}; exec "$@"', "sh"]


def without_capabilities() -> list[str]:
    """Root without its capabilities: file modes apply to it, as to an ordinary user (the
    interpreter under /root stays readable, which `nobody` could not do)."""
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]


def read_only_tree(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


@needs_root
@pytest.mark.parametrize("how", ["read-only mount", "unwritable files"])
def test_replay_of_a_completed_answer_works_on_read_only_storage(
    jmp: Cli, template: Path, how: str
) -> None:
    sid = copied(jmp, template)
    before = tree(jmp.home)
    home = str(jmp.home)
    if how == "read-only mount":
        wrapper = in_namespace(f"mount --bind {home} {home}; mount -o remount,ro,bind {home}")
    else:  # EACCES, and no lock file to open either
        (jmp.home / sid / "lock").unlink(missing_ok=True)
        read_only_tree(jmp.home)
        before = tree(jmp.home)
        wrapper = without_capabilities()
    replay = run_wrapped(jmp, wrapper, "--session", sid)
    assert replay.code == 0, replay.stdout + replay.stderr
    assert replay.result["status"] == "completed"
    assert replay.result["summary"] == "first answer"
    assert tree(jmp.home) == before
    # Anything that would write is refused up front, naming the directory.
    follow_up = run_wrapped(jmp, wrapper, "--session", sid, "more", "--no-mcp")
    assert follow_up.code == 2
    summary = follow_up.result["summary"]
    assert "read-only" in summary and sid in summary and "internal error" not in summary
    assert tree(jmp.home) == before


@needs_root
def test_a_full_disk_is_named_with_the_path(jmp: Cli) -> None:
    jmp.home.mkdir()
    home = str(jmp.home)
    fill = f"mount -t tmpfs -o size=64k tmpfs {home}; (head -c 999999 /dev/zero >{home}/f || :)"
    out = run_wrapped(jmp, in_namespace(fill), "--workspace", str(jmp.workspace), "a task")
    assert out.code == 2, out.stdout + out.stderr
    summary = out.result["summary"]
    assert "internal error" not in summary
    assert "No space left on device" in summary and "ENOSPC" in summary
    assert home in summary  # where


@needs_root
def test_an_unreadable_log_is_named_not_an_internal_error(jmp: Cli, template: Path) -> None:
    sid = copied(jmp, template)
    log = jmp.home / sid / "events.jsonl"
    log.chmod(0)
    out = run_wrapped(jmp, without_capabilities(), "--session", sid)
    assert out.code == 2, out.stdout + out.stderr
    summary = out.result["summary"]
    assert "internal error" not in summary
    assert "Permission denied" in summary and str(log) in summary


def test_a_deleted_workspace_is_named(jmp: Cli, template: Path) -> None:
    sid = copied(jmp, template)
    shutil.rmtree(jmp.workspace)
    out = run_wrapped(jmp, [], "--session", sid, "continue")
    assert out.code == 2
    summary = out.result["summary"]
    assert "internal error" not in summary
    assert str(jmp.workspace) in summary, summary


def processes_of(jmp: Cli) -> set[int]:
    """The pids running with this test's sessions dir (kernel and workers, cold or warm: a
    forked worker's /proc environ is the pool's, so the kernels' workers are added)."""
    found = set()
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("JMP_SESSIONS_DIR") == str(jmp.home):
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found.union(*(tree_of(pid) for pid in found))


def runtime_dirs_of(pids: set[int]) -> set[Path]:
    """The ipc:// runtime dirs named on the command lines of these worker processes."""
    found = set()
    for pid in pids:
        try:
            cmdline = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        found |= {Path(m) for m in re.findall(r"ipc://(/tmp/jmp-[^/ ]+)/", cmdline)}
    return found


@pytest.mark.timeout(300)
def test_runtime_dirs_of_a_killed_kernel_are_removed_on_the_next_start(
    jmp: Cli, template: Path
) -> None:
    sid = copied(jmp, template)
    jmp.jev.script([{"route": "bash"}])
    jmp.flash.queue([{"tool_call": {"arguments": {"command": "sleep 60.5151"}}}])
    proc = jmp.start("--session", sid, "run the slow job")
    wait_for_line(proc, lambda line: line["kind"] == "tool_started", timeout=240)
    left = runtime_dirs_of(processes_of(jmp))
    assert left and all(d.is_dir() for d in left)
    kill_group(proc)
    # Another user's dir and a live kernel's dir (this test process) are never touched.
    foreign = Path(f"/tmp/jmp-{2**22 + 7}-1-foreign{os.getpid()}")
    foreign.mkdir()
    live = Path(f"/tmp/jmp-{os.getpid()}-{start_ticks(os.getpid())}-live")
    live.mkdir()
    try:
        if os.geteuid() == 0:
            os.chown(foreign, NOBODY, NOBODY)
        after = jmp.run("--session", sid, timeout=120)
        assert after.result["status"] == "blocked"
        assert not [d for d in left if d.exists()], left
        assert live.is_dir()
        if os.geteuid() == 0:
            assert foreign.is_dir()
    finally:
        shutil.rmtree(foreign, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)


def start_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[19])
