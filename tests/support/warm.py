"""A private warm pool for one test: its own runtime dir, killed (with nothing left) at the end."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil

from host import confinement as C
from host import landlock as L
from host import pool as H
from host.spawn import module_of
from kernel.supervision.runtime import start_ticks
from protocol import pool as P

ROOT = Path(__file__).resolve().parents[2]
POOL_DIR_ROOT = "/tmp"  # short: the pool's socket lives in it
FAKE = ("tests.fakes.worker",)  # the test pools fork the fake worker too
_POOL_DIR = re.compile(r"jw[a-z]*-(\d+)-(\d+)-[A-Za-z0-9_]+")


def ask_status(directory: Path, view: str | None = None) -> P.State | None:
    """The state of the pool of our view (or of `view`) in `directory`, None if none answers."""
    from workers.pool.cli import ask

    state = ask(directory, P.Status(), timeout_s=5.0, view=view)
    return state if isinstance(state, P.State) else None


def view_key_of(wrap: Sequence[str]) -> str:
    """The confinement view (`host.confinement.view_key`) of a process started under
    `wrap` (e.g. `setpriv --no-new-privs`): the name of the dir its pool lives in."""
    code = "from host import confinement as C; print(C.own_view_key())"
    done = subprocess.run(
        [*wrap, sys.executable, "-c", code],
        cwd=str(ROOT),
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


class PoolProc:
    """`python -m workers.pool serve DIR` as a child of the test (not detached), under `wrap`
    when given (a confined pool, as a kernel so confined starts). `home` is where the pool of
    its view keeps its socket, lock, pid file and log."""

    def __init__(
        self,
        directory: Path,
        preload: str = "none",
        root: Path = ROOT,
        ready_s: float = 100,
        idle_s: float = 600,
        wrap: Sequence[str] = (),
    ) -> None:
        self.dir = directory
        self.view = view_key_of(wrap) if wrap else C.own_view_key()
        self.home = H.view_dir(directory, self.view)
        self.sock = self.home / "pool.sock"
        env = H.pool_env(os.environ) | {"PYTHONPATH": str(root)}
        argv = [*wrap, *H.serve_argv(sys.executable, directory, idle_s, preload, FAKE)]
        self.proc = subprocess.Popen(argv, env=env, cwd=str(root), stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + ready_s
        while (state := ask_status(directory, self.view)) is None:  # answers once imported
            assert self.proc.poll() is None, f"pool exited {self.proc.returncode}"
            assert time.monotonic() < deadline, "pool did not answer"
            time.sleep(0.05)
        self.state = state
        self.pid = state.pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def log(self) -> str:
        path = self.home / "pool.log"
        return path.read_text() if path.exists() else ""


AGED_POOL = """
import sys, time
from workers.pool import cli as pool_cli, conn as pool_conn
offset_file = sys.argv.pop(1)

def aged() -> float:  # the pool's one clock, moved on by what is written into the file
    with open(offset_file) as f:
        return time.monotonic() + float(f.read() or 0)

pool_conn.Connections.clock = staticmethod(aged)
sys.exit(pool_cli.main(sys.argv[1:]))
"""


def aged_pool(
    directory: Path, offset: Path, preload: str = "all", root: Path = ROOT
) -> subprocess.Popen[bytes]:
    """A pool serving `directory` with the default idle time (no --idle, no JMP_WARM_IDLE_S),
    as the first run of the day starts one, whose one clock (`Connections.clock`, every deadline
    and idle time of the pool) runs as many seconds ahead as `offset` holds: writing 900 there
    has it idle for 15 minutes more, with no wait (issue 25). It answers once imported."""
    if not offset.exists():
        offset.write_text("0")
    argv = H.serve_argv(sys.executable, directory, 1, preload, FAKE)
    args = [a for a in argv[argv.index("workers.pool") + 1 :] if not a.startswith("--idle")]
    env = H.pool_env(os.environ) | {"PYTHONPATH": str(root)}
    env.pop("JMP_WARM_IDLE_S", None)
    return subprocess.Popen(
        [sys.executable, "-c", AGED_POOL, str(offset), *args],
        env=env,
        cwd=str(root),
        stdin=subprocess.DEVNULL,
    )


def make_pool_dir(kind: str = "") -> Path:
    """A fresh 0700 dir for a private pool, /tmp/jw<kind>-<pid>-<start ticks>-<random>, named
    after this process; first removes this user's dead ones (`clean_pool_dirs`). The creator
    removes its own at the end, but a killed test run or bench cannot."""
    clean_pool_dirs()
    pid = os.getpid()
    prefix = f"jw{kind}-{pid}-{start_ticks(pid) or 0}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=POOL_DIR_ROOT))


def clean_pool_dirs() -> list[str]:
    """Remove this user's pool dirs made by `make_pool_dir` whose creator is gone and which no
    pool serves (nobody holds pool.lock, which a live pool holds all its life); returns the
    names removed. A dir of a live creator or a live pool, or not a real dir of ours, stays."""
    removed = []
    with contextlib.suppress(OSError), os.scandir(POOL_DIR_ROOT) as entries:
        for entry in entries:
            match = _POOL_DIR.fullmatch(entry.name)
            if match is None or not _own_dir(entry):
                continue
            pid, ticks = int(match.group(1)), int(match.group(2))
            actual = start_ticks(pid)  # a reused pid has other start ticks
            if (actual is not None and ticks in (0, actual)) or _pool_serves(Path(entry.path)):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return removed


def _own_dir(entry: os.DirEntry[str]) -> bool:
    with contextlib.suppress(OSError):
        info = entry.stat(follow_symlinks=False)
        return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
    return False


def _pool_serves(directory: Path) -> bool:
    """A pool holds its view dir's pool.lock (flock) from before it binds until it exits."""
    try:
        views = [e.name for e in os.scandir(directory) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return True  # unsure counts as alive
    for view in views:
        try:
            fd = os.open(directory / view / "pool.lock", os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


@contextlib.contextmanager
def private_pool(preload: str = "none", root: Path = ROOT) -> Iterator[PoolProc]:
    """A pool in a fresh 0700 dir, JMP_WARM=1 and JMP_WARM_DIR pointing at it meanwhile."""
    directory = make_pool_dir()
    saved = {k: os.environ.get(k) for k in ("JMP_WARM", "JMP_WARM_DIR")}
    pool = None
    try:
        pool = PoolProc(directory, preload, root)
        os.environ |= {"JMP_WARM": "1", "JMP_WARM_DIR": str(directory)}
        yield pool
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if pool is not None:
            pool.kill()
        shutil.rmtree(directory, ignore_errors=True)


def children_of(pid: int) -> list[psutil.Process]:
    """The children of process `pid`; of a pool, its workers only (the Landlock probe its
    title names, alive as long as the pool, left out: host/landlock.py)."""
    try:
        proc = psutil.Process(pid)
        probe = L.probe_of_title([c for c in proc.cmdline() if c])
        return [child for child in proc.children() if child.pid != probe]
    except psutil.Error:
        return []


def workers_of(kernel_pid: int, kind: str = "") -> list[psutil.Process]:
    """The live worker processes (`python -P -m workers.KIND`, any kind when empty) serving the
    kernel `kernel_pid`, cold or warm: a cold worker is the kernel's child; a forked one is the
    pool's child and holds a pidfd of its kernel (how it watches it), which /proc shows."""
    found = []
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        command = module_of([c for c in proc.info["cmdline"] or [] if c])
        module = command[0] if command else ""
        if not module.startswith("workers.") or (kind and module != f"workers.{kind}"):
            continue
        serves = proc.info["ppid"] == kernel_pid or kernel_pid in _pidfd_targets(proc.pid)
        if serves and _running(proc.pid):
            found.append(proc)
    return found


def tree_of(pid: int) -> list[int]:
    """Every live process working for `pid`, warm or cold: its descendants, and the workers the
    pool forked for it with their descendants (what must be gone after it stops)."""
    pids: set[int] = set()
    for root in [pid, *(w.pid for w in workers_of(pid))]:
        with contextlib.suppress(psutil.Error):
            pids |= {root} | {p.pid for p in psutil.Process(root).children(recursive=True)}
    pids.discard(pid)
    return sorted(pids)


def processes_of(home: Path, root: Path, marker: str = "") -> list[psutil.Process]:
    """Every live process of one test's kernels (not the test's own), warm or cold: those whose
    /proc environ names `home` as JMP_SESSIONS_DIR (the kernels, cold workers, their shells),
    those whose cwd is under `root` (a forked worker: /proc shows the pool's environ, but it took
    its kernel's cwd, and keeps it after its kernel is gone), any holding a pidfd of one of those
    kernels (a forked worker watches its kernel so), and any with `marker` in its command line.
    `root` must be the test's own temp dir."""
    found: dict[int, psutil.Process] = {}
    others: list[psutil.Process] = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        if proc.pid == os.getpid() or not _running(proc.pid):
            continue
        with contextlib.suppress(psutil.Error):
            cwd = Path(proc.info["cwd"] or "/")
            cmd = " ".join(proc.info["cmdline"] or [])
            if (
                cwd.is_relative_to(root)
                or (marker and marker in cmd)
                or proc.environ().get("JMP_SESSIONS_DIR") == str(home)
            ):
                found[proc.pid] = proc
            else:
                others.append(proc)
    kernels = set(found)
    found |= {p.pid: p for p in others if _pidfd_targets(p.pid) & kernels}
    return list(found.values())


def _pidfd_targets(pid: int) -> set[int]:
    """The pids that process `pid` holds pidfds of (from /proc/PID/fdinfo)."""
    targets = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[pidfd]":
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                    for line in info:
                        if line.startswith("Pid:"):
                            targets.add(int(line.split()[1]))
    return targets


def gone(pids: list[int], timeout_s: float = 10.0) -> bool:
    """True once none of `pids` runs (zombies count as gone); a liveness bound, not a speed test."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not [p for p in pids if _running(p)]:
            return True
        time.sleep(0.05)
    return False


def _running(pid: int) -> bool:
    """Not yet exited: a zombie whose threads are all gone has (its pidfd is readable then; a
    leader shows as a zombie in /proc while its other threads still exit)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return not poller.poll(0)
    finally:
        os.close(pidfd)


def pool_pids(directory: Path, view: str | None = None) -> list[int]:
    """Pids of jmp-warm-pool processes serving `directory` (by their title), of any view or of
    `view` only."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = [c for c in proc.info["cmdline"] or [] if c]
        if cmd[:2] == [H.TITLE, str(directory)] and (view is None or cmd[2:3] == [view]):
            found.append(proc.pid)
    return found


def launch_pool(directory: Path, wrap: Sequence[str] = ()) -> None:
    """Start a detached pool (every kind preloaded) serving `directory`, as a kernel would (one
    run under `wrap`, e.g. setpriv, when given); it answers once its imports are done (kernels
    spawn cold until then)."""
    idle = H.idle_timeout(os.environ)
    argv = [*wrap, *H.serve_argv(sys.executable, directory, idle, also=FAKE), "--detach"]
    launcher = subprocess.Popen(
        argv,
        env=H.pool_env(os.environ),
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    launcher.wait()  # it forks the pool and exits at once


@contextlib.contextmanager
def stop_pools_started(private: Path, spare: Path | None = None) -> Iterator[None]:
    """Kill, at the end, every pool serving `private`, a dir this process made
    (`make_pool_dir`: a kernel under test may launch a pool into a test's private dir, e.g.
    to replace a stale one), or started meanwhile in the default dir; never one serving
    `spare` (a test of this inside the suite spares the suite's own pool)."""
    env = {k: v for k, v in os.environ.items() if k != "JMP_WARM_DIR"}
    default = H.pool_dir(env, os.getuid())
    before = set(pool_pids(default))
    try:
        yield
    finally:
        started = [p for p in pool_pids(default) if p not in before]
        spared = set(pool_pids(spare)) if spare is not None else set()
        for pid in pool_pids(private) + pools_in_dirs_made_here() + started:
            if pid in spared:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def pools_in_dirs_made_here() -> list[int]:
    """Pids of pools serving a dir that `make_pool_dir` made in this process (by title)."""
    pid = os.getpid()
    mine = (str(pid), str(start_ticks(pid) or 0))
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = [c for c in proc.info["cmdline"] or [] if c]
        if len(cmd) < 2 or cmd[0] != H.TITLE or Path(cmd[1]).parent != Path(POOL_DIR_ROOT):
            continue
        match = _POOL_DIR.fullmatch(Path(cmd[1]).name)
        if match and match.groups() == mine:
            found.append(proc.pid)
    return found


def suite_pool(directory: Path, ready_s: float = 120, wrap: Sequence[str] = ()) -> int:
    """The pid of the suite's own pool (conftest: every kind preloaded, in `directory`),
    launched now if no pool serves it yet, once it answers. For a test that needs a preloaded
    pool and asserts nothing about the pool's other children (a private one would preload
    the same SDKs again). With `wrap` (a confinement such as setpriv): the suite's pool of that
    view, which kernels so confined use (they never use the unconfined one)."""
    view = view_key_of(wrap) if wrap else C.own_view_key()
    if not pool_pids(directory, view):
        launch_pool(directory, wrap)
    deadline = time.monotonic() + ready_s
    while (state := ask_status(directory, view)) is None:
        assert time.monotonic() < deadline, "the suite's pool did not answer"
        time.sleep(0.05)
    return state.pid


IMPOSTOR = """
import json, os, socket, sys
from pathlib import Path
import workers  # non-dumpable, as a jmp pool is
from workers.pool import child as pool_child
from protocol import pool as P
from host import pool as H
from host import landlock as L
directory, view, out, answer = sys.argv[1:5]
probe = L.Probe(hidden_cwd=True)  # a Landlock probe of its own, as a pool shows (host/landlock.py)
pool_child.set_title(H.TITLE[:15], [H.TITLE, directory, view, f"{L.TITLE_PREFIX}{probe.pid}"])
home = H.view_dir(Path(directory), view)
home.mkdir(mode=0o700, exist_ok=True)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(str(home / "pool.sock"))
listener.listen(1)
print("ready", flush=True)
conn, _ = listener.accept()
data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 32)
env = b""
if len(fds) > 2:
    while chunk := os.read(fds[2], 65536):
        env += chunk
Path(out).write_text(json.dumps({"frame": data.hex(), "env": env.hex(), "fds": len(fds)}))
if answer:
    conn.sendall(bytes.fromhex(answer))
conn.close()
"""


class Impostor:
    """A process of ours that takes the socket of the pool of our view in `directory` and
    passes every check a kernel can make (our uid, the pool's title, our interpreter,
    non-dumpable, a Landlock probe in our domain): a same-user process set on impersonating
    the pool. It accepts one connection, keeps what it received (`received()`), answers
    `answer` (None: it just closes) and exits."""

    def __init__(self, directory: Path, answer: P.AnyPoolMsg | None = None) -> None:
        self.out = directory / "impostor.json"
        reply = P.encode(answer).hex() if answer is not None else ""
        argv = [sys.executable, "-c", IMPOSTOR, str(directory), C.own_view_key(), str(self.out)]
        self.proc = subprocess.Popen(
            [*argv, reply, "--pad=" + "-" * 300],
            cwd=str(ROOT),
            env=os.environ | {"PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def received(self, timeout_s: float = 30) -> dict[str, bytes | int]:
        """What the one connection brought: the frame's bytes, the environment pipe's bytes,
        the number of fds."""
        self.proc.wait(timeout_s)
        got = json.loads(self.out.read_text())
        return {**got, "frame": bytes.fromhex(got["frame"]), "env": bytes.fromhex(got["env"])}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
