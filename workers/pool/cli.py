"""`python -m workers.pool start|stop|status|serve`: the warm pool's own commands.

start   launch the pool detached in the runtime dir (JMP_WARM_DIR, else $XDG_RUNTIME_DIR/
        jmp-warm-TAG, else /tmp/jmp-warm-UID-TAG) and wait until it answers; prints its state
stop    ask the pool to exit (its live workers keep serving their kernels)
status  print the pool's state as JSON; exit 1 when no pool answers
serve   run the pool in the foreground (what `start` and kernels launch)

Each confinement view (credentials, capabilities, no_new_privs, seccomp, LSM label,
securebits, root directory, namespaces) has a pool of its own, in DIR/VIEW: the commands act
on the pool of the view they run in (and in their Landlock domain: host/landlock.py).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from host import confinement as C
from host import landlock as L
from host import pool as H
from host.own_files import open_own, write_own
from host.spawn import SPAWN_CWD
from protocol import pool as P
from workers.pool import child as pool_child
from workers.pool.conn import SELF_UID, log, read_frame
from workers.pool.server import LOCK_WAIT_S, Pool

START_WAIT_S = 300.0  # the first import of OpenHands on a busy machine


def ask(
    directory: Path, msg: P.AnyPoolMsg, timeout_s: float = 5.0, view: str | None = None
) -> P.AnyPoolMsg | None:
    """One request/answer on a fresh connection to the pool of our view (or of `view`) in
    `directory`; None when no pool answers."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(H.view_dir(directory, view or C.own_view_key()) / "pool.sock"))
            sock.sendall(P.encode(msg))
            if isinstance(msg, P.Stop):
                return msg
            return read_frame(sock)[0]
    except (OSError, EOFError, ValueError, msgspec.DecodeError):
        return None


def serve(
    directory: Path, idle_s: float, kinds: list[str], detach: bool, also: tuple[str, ...] = ()
) -> int:
    """Run the pool of our view in `directory` (0700, ours) until idle, Stop or SIGTERM.
    `also`: modules it forks besides jmp's workers (the tests' fake worker)."""
    if detach and os.fork() != 0:
        os._exit(0)  # the launcher reaps this one; the pool is nobody's child but init's
    with contextlib.suppress(OSError):
        os.setsid()  # no terminal's Ctrl+C, no kernel's process group
    pool = Pool(directory, idle_s, [], (*P.WORKER_MODULES, *also))
    home = H.view_dir(directory, pool.key)
    problem = check_dir(directory) or check_dir(home)
    if problem:
        print(f"jmp-warm-pool: {problem}", file=sys.stderr)
        return 2
    try:  # a planted link, FIFO or hard link in the dir is refused, never followed
        lock = open_own(home / "pool.lock", os.O_RDWR | os.O_CREAT)
        if not take_lock(lock, LOCK_WAIT_S):
            return 0  # another pool serves (or is starting in) this directory
        logfd = open_own(home / "pool.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        write_own(home / "pool.pid", f"{os.getpid()}\n".encode())
    except OSError as exc:
        print(f"jmp-warm-pool: {exc}", file=sys.stderr)
        return 2
    os.dup2(logfd, 1)
    os.dup2(logfd, 2)
    os.close(logfd)
    try:
        probe = L.Probe(
            hidden_cwd=True
        )  # what kernels read to tell our Landlock domain (host/landlock.py)
    except OSError as exc:
        print(f"jmp-warm-pool: the Landlock probe cannot start: {exc}", file=sys.stderr)
        return 2
    pool.probe = probe
    title = [H.TITLE, str(directory), pool.key, f"{L.TITLE_PREFIX}{probe.pid}"]
    pool_child.set_title(H.TITLE[:15], title)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    pool.preloaded = pool_child.preload(kinds)
    pool_child.freeze()
    log(f"preloaded {pool.preloaded}; {pool_child.threads()} thread(s); view {pool.key}")
    path = home / "pool.sock"
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # stale: we hold the lock, so no live pool owns it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(64)
    try:
        pool.serve(listener)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            (home / "pool.pid").unlink()
        os._exit(0)  # no interpreter teardown of thousands of modules: the lock frees now


def take_lock(fd: int, wait_s: float) -> bool:
    """flock the pool lock; a pool being replaced gets `wait_s` to exit and let go."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)  # a detached process polling a lock: nobody waits on it


def check_dir(directory: Path) -> str:
    """Create the runtime dir 0700; refuse one that is not ours, private and real."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700, parents=True)
    st = os.lstat(directory)
    if not os.path.isdir(directory) or os.path.islink(directory):
        return f"{directory} is not a directory"
    if st.st_uid != SELF_UID or st.st_mode & 0o077:
        return f"{directory} must be owned by uid {SELF_UID} with mode 0700"
    return ""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.pool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["start", "stop", "status", "serve"])
    parser.add_argument("dir", nargs="?", default=None)
    parser.add_argument("--idle", type=float, default=None)
    parser.add_argument("--preload", default="all")
    parser.add_argument("--detach", action="store_true")
    parser.add_argument("--pad", default="", help=argparse.SUPPRESS)
    # A module the pool forks besides jmp's workers: for the tests' fake worker only.
    parser.add_argument("--also-fork", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    directory = Path(args.dir) if args.dir else H.pool_dir(os.environ, os.getuid())
    idle = args.idle if args.idle and args.idle > 0 else H.idle_timeout(os.environ)
    if args.command == "serve":
        kinds = [] if args.preload == "none" else args.preload.split(",")
        if args.preload == "all":
            kinds = ["tool", "router", "generator", "harness"]
        return serve(directory, idle, kinds, args.detach, tuple(args.also_fork))
    if args.command == "stop":
        if ask(directory, P.Status()) is None:
            print(f"no warm pool in {directory}")
            return 0
        ask(directory, P.Stop())
        print(f"stopped the warm pool in {directory}")
        return 0
    state = ask(directory, P.Status())
    if args.command == "start" and state is None:
        argv = [*H.serve_argv(sys.executable, directory, idle, args.preload), "--detach"]
        subprocess.run(
            argv,
            env=H.pool_env(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=SPAWN_CWD,  # never the launch dir: the pool forks every worker
            check=False,
        )
        deadline = time.monotonic() + START_WAIT_S
        while state is None and time.monotonic() < deadline:
            time.sleep(0.2)  # polling a socket that appears once the imports are done
            state = ask(directory, P.Status())
    if state is None:
        print(f"no warm pool in {directory}", file=sys.stderr)
        return 1
    print(json.dumps(msgspec.to_builtins(state)))
    return 0
