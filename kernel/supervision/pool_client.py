"""The kernel's side of the warm pool: ask it for a fresh worker, or say why not (cold spawn).

`spawn()` returns a `WarmProc` or None, never raises: a pool that is missing, dead, stale,
slow, foreign, differently confined or erroring costs one stderr note and the caller spawns
cold. A missing pool is started (detached, in the background, inheriting this kernel's
confinement) for the next run; a stale one (other code) is stopped and replaced. Each
confinement view has its own pool (`H.view_dir`). Before anything is sent, the listener must be
a jmp pool of ours for this directory and view: same uid, its title, our interpreter (when its
/proc entry lets us look). The worker's environment travels on a pipe whose read end rides
with the request, so the pool never reads it. The worker's pid is pinned by the pool (not
reaped before `Release`), so the kernel's tree kill (process group, recorded descendants,
token) is as safe as for its own children; the kernel watches and signals the worker through
a pidfd.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import IO

import msgspec

from host import confinement as C
from host import landlock as L
from host import pool as H
from host.own_files import open_own
from host.spawn import module_of
from kernel.display import terminal_safe
from kernel.supervision.pool_checks import check_dir, listener_problem
from kernel.supervision.restart import POOL_CONNECT_S, POOL_EXIT_STATUS_S
from protocol import pool as P

_notes: set[str] = set()
_note_lock = threading.Lock()
_fingerprint: str | None = None
_launched = False  # this process already launched a pool


def enabled() -> bool:
    """JMP_WARM=0 turns the pool off (today's cold path everywhere)."""
    return os.environ.get("JMP_WARM", "1").strip() != "0"


def directory() -> Path:
    """The runtime dir (JMP_WARM_DIR, ...); the pool of our view lives in `home()`."""
    return H.pool_dir(os.environ, os.getuid())


def home() -> Path:
    return H.view_dir(directory(), C.own_view_key())


def fingerprint() -> str:
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = H.code_fingerprint()
    return _fingerprint


def note(text: str) -> None:
    """One stderr line per distinct reason per process: the only trace of a fallback. Text a
    pool supplied (a refusal's detail) is shown inert, like any text from outside."""
    text = terminal_safe(text)
    with _note_lock:
        if text in _notes:
            return
        _notes.add(text)
    with contextlib.suppress(Exception):
        sys.stderr.write(f"jmp: warm pool: {text}\n")
        sys.stderr.flush()


class WarmProc:
    """A worker forked by the pool, as the I/O thread sees it (the Popen subset it uses)."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid, self.conn = pid, conn
        self.stdout: IO[bytes] | None = None  # set by the caller when output is piped
        self.stderr: IO[bytes] | None = None
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # already reaped (the pool died): it has exited
            self.pidfd = None

    def kill_root(self) -> None:
        """SIGKILL the worker through its pidfd, never by pid: once its pool has died, init
        reaps it and the pid may name another process."""
        if self.pidfd is not None:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def exited(self) -> bool:
        """Has the worker exited? (A zombie counts; the pool keeps it unreaped for us.)"""
        return self.pidfd is None or _readable(self.pidfd, 0)

    def wait(self) -> int | None:
        """Block until it exited; its status like Popen.returncode, None if the pool is gone.
        Then let the pool reap it (the caller has already killed the tree)."""
        if self.pidfd is not None:
            _readable(self.pidfd, None)
        code = self._status()
        with contextlib.suppress(OSError):
            self.conn.sendall(P.encode(P.Release()))
        self.conn.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        return code

    def _status(self) -> int | None:
        self.conn.settimeout(POOL_EXIT_STATUS_S)
        try:
            while True:
                msg = read_frame(self.conn)
                if isinstance(msg, P.Exited) and msg.pid == self.pid:
                    return -msg.signal if msg.signal is not None else msg.exit_code
        except (OSError, EOFError, ValueError, msgspec.DecodeError):
            return None


def spawn(
    argv: list[str], env: dict[str, str], out_fd: int, err_fd: int, in_fd: int | None = None
) -> WarmProc | None:
    """Ask the pool for `argv` (`host.spawn.module_argv`) with environment `env`; None
    means: spawn cold. `in_fd`, when given, becomes the worker's stdin (else /dev/null)."""
    if module_of(argv) is None:
        return None
    problem = check_dir(directory()) or check_dir(home())
    if problem:
        note(f"{problem}; workers start cold")
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(POOL_CONNECT_S)
        sock.connect(str(home() / "pool.sock"))
        problem, proof = listener_problem(sock)
        if problem or proof is None:
            sock.close()
            note(f"{problem}; workers start cold")
            return None
        try:
            reply = _request(sock, argv, env, [out_fd, err_fd], in_fd, proof)
        finally:
            os.close(proof)
    except NoProbe as exc:
        sock.close()
        note(f"our Landlock probe cannot start ({exc}): no pool can tell our domain; cold")
        return None
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        note("not running: workers start cold this time; one is starting for the next run")
        start()
        return None
    except (OSError, EOFError, ValueError, msgspec.DecodeError) as exc:
        sock.close()
        note(f"unusable ({type(exc).__name__}: {exc}); workers start cold")
        return None
    if isinstance(reply, P.Spawned):
        sock.settimeout(None)
        return WarmProc(reply.pid, sock)
    sock.close()
    if isinstance(reply, P.Refused) and reply.code == "stale":
        note("runs other code; replacing it, workers start cold")
        stop()
        start(replace=True)
    else:
        note(f"refused: {getattr(reply, 'detail', reply)}; workers start cold")
    return None


class NoProbe(Exception):
    """Our Landlock probe (`host/landlock.py`) cannot start: nobody can tell our domain."""


def _request(
    sock: socket.socket,
    argv: list[str],
    env: dict[str, str],
    out: list[int],
    in_fd: int | None,
    proof: int | None = None,
) -> P.AnyPoolMsg:
    """Send the Spawn with its fds (stdout, stderr, the environment pipe, stdin, our
    namespaces, `proof`: the pool probe's working directory from `listener_problem`) and read
    the answer. Our own Landlock probe lives until the answer is read."""
    spaces = C.namespaces()
    try:
        probe = L.Probe()
    except OSError as exc:  # no `cat` to exec (a chroot, a Landlock without execute rights)
        raise NoProbe(f"{type(exc).__name__}: {exc}") from exc
    request = P.Spawn(
        fingerprint=fingerprint(),
        module=argv[argv.index("-m") + 1],  # a `module_argv`, checked by `spawn`
        argv=argv[argv.index("-m") + 2 :],
        cwd=os.getcwd(),
        stdin=in_fd is not None,
        namespaces=list(spaces),
        securebits=C.securebits(),
        probe=probe.pid,
        proof=proof is not None,
    )
    opened: list[int] = []
    try:
        env_r, env_w = os.pipe()
        opened.append(env_r)
        _write_env(env_w, P.encode_env(env))
        for name in spaces:
            opened.append(os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC))
        stdin = [] if in_fd is None else [in_fd]
        extra = [] if proof is None else [proof]
        socket.send_fds(sock, [P.encode(request)], [*out, env_r, *stdin, *opened[1:], *extra])
        for fd in opened:
            os.close(fd)  # the worker holds the only copies now
        opened.clear()
        return read_frame(sock)
    finally:
        for fd in opened:
            os.close(fd)
        probe.close()


def _write_env(fd: int, data: bytes) -> None:
    """Write the worker's environment into its pipe and close it: at once when it fits (the
    usual case), else the rest from a thread while the pool forks (the worker reads it)."""
    os.set_blocking(fd, False)
    try:
        done = os.write(fd, data)
    except BlockingIOError:
        done = 0
    except OSError:
        os.close(fd)
        raise
    if done == len(data):
        os.close(fd)
        return
    os.set_blocking(fd, True)
    rest = data[done:]

    def finish() -> None:
        view = memoryview(rest)
        with contextlib.suppress(OSError):  # EPIPE: refused, the pool closed the read end
            while view:
                view = view[os.write(fd, view) :]
        os.close(fd)

    threading.Thread(target=finish, daemon=True, name="worker-env").start()


def _readable(fd: int, timeout_ms: int | None) -> bool:
    """poll(2), not select(2): a kernel may hold more than FD_SETSIZE descriptors."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_ms))


def read_frame(sock: socket.socket) -> P.AnyPoolMsg:
    head = _read_exactly(sock, 4)
    size = struct.unpack(">I", head)[0]
    if size > P.MAX_FRAME:
        raise ValueError("pool frame too large")
    return P.decode(_read_exactly(sock, size))


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the pool closed the connection")
        buf += chunk
    return buf


def start(replace: bool = False) -> None:
    """Launch the pool detached unless one holds the lock; returns at once. With `replace`
    the new pool waits a little for the stopping one to let go of the lock."""
    global _launched
    path = directory()
    with _note_lock:
        if _launched and not replace:
            return  # the router, generator and tool threads all find no pool at once
        _launched = True
    if check_dir(path) or check_dir(home()) or (not replace and _locked(home())):
        return
    import subprocess  # only to launch a pool: a served kernel never needs it

    argv = [*H.serve_argv(sys.executable, path, H.idle_timeout(os.environ)), "--detach"]
    with contextlib.suppress(OSError):
        proc = subprocess.Popen(
            argv,
            env=H.pool_env(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
        )
        threading.Thread(target=proc.wait, daemon=True, name="warm-launch").start()


def stop() -> bool:
    """Ask the pool of our view to exit (best effort; only a listener that passes
    `listener_problem`); True when one was asked (`jmp --stop-pool`)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(POOL_CONNECT_S)
        sock.connect(str(home() / "pool.sock"))
        problem, proof = listener_problem(sock)
        if proof is not None:
            os.close(proof)
        if not problem:
            sock.sendall(P.encode(P.Stop()))
            return True
    return False


def _locked(path: Path) -> bool:
    """Does a pool (running or starting) hold the directory's lock?"""
    try:
        lock = open_own(path / "pool.lock", os.O_RDWR | os.O_CREAT)
    except OSError:  # a planted link or special file counts as held: no pool is launched
        return True
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(lock)  # closing drops our lock: the pool takes it itself
    return False
