"""The warm worker pool: a per-user process that has imported the workers' SDKs and forks a
fresh worker per kernel request.

    python -m workers.pool start | stop | status     (JMP_WARM_DIR, JMP_WARM_IDLE_S apply)
    python -m workers.pool serve DIR [--idle S] [--preload KINDS] [--detach]

It holds nothing of value: it never opens a session and never sees a prompt or model request,
so a kill at any moment costs nothing (kernels fall back to a cold spawn). It serves only its
own uid (SO_PEERCRED), only kernels with its code fingerprint, forks only while it has exactly
one OS thread, and reaps a worker only after its kernel has killed that worker's tree (Release
or a closed connection), so the worker's pid cannot be reused before then. It exits after
`--idle` seconds with no connection and no live worker.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from protocol import pool as P
from workers import pool_child

_SELF = os.getuid()
LOCK_WAIT_S = 10.0


@dataclass
class Conn:
    sock: socket.socket
    kernel_pidfd: int
    child: int | None = None  # pid of the worker forked for this connection
    kernel_pid: int = 0


class Pool:
    def __init__(self, directory: Path, idle_s: float, preloaded: list[str]) -> None:
        self.dir, self.idle_s, self.preloaded = directory, idle_s, preloaded
        self.fingerprint = P.code_fingerprint()
        self.sel = selectors.DefaultSelector()
        self.conns: dict[int, Conn] = {}  # socket fd -> connection
        self.children: dict[int, tuple[int, Conn | None]] = {}  # pidfd -> (pid, its kernel)
        self.exited: set[int] = set()  # pids that exited and wait for Release
        self.last_active = time.monotonic()
        self.running = True
        self.private_fds: list[int] = []  # the lock: a worker holding it would block a new pool

    def serve(self, listener: socket.socket) -> None:
        self.listener = listener
        self.sel.register(listener, selectors.EVENT_READ, "accept")
        while self.running:
            busy = self.conns or self.children
            wait = None if busy else max(0.0, self.last_active + self.idle_s - time.monotonic())
            if not busy and wait == 0.0:
                log("idle timeout: exiting")
                return
            for key, _ in self.sel.select(wait):
                kind = key.data
                if kind == "accept":
                    self.accept()
                elif kind == "child":
                    self.child_exited(key.fd)
                else:
                    self.readable(self.conns[key.fd])
            self.last_active = (
                time.monotonic() if (self.conns or self.children) else self.last_active
            )

    def accept(self) -> None:
        sock, _ = self.listener.accept()
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        if not peer_allowed(uid):
            log(f"refused a connection from uid {uid}")
            sock.close()
            return
        try:
            pidfd = os.pidfd_open(pid)  # the kernel, pinned: a forked worker watches this
        except OSError:
            sock.close()
            return
        sock.settimeout(2.0)
        conn = Conn(sock, pidfd, kernel_pid=pid)
        self.conns[sock.fileno()] = conn
        self.sel.register(sock, selectors.EVENT_READ, "conn")

    def readable(self, conn: Conn) -> None:
        try:
            msg, fds = read_frame(conn.sock)
        except (OSError, EOFError, ValueError, msgspec.DecodeError) as exc:
            if not isinstance(exc, EOFError):
                self.reply(
                    conn, P.Refused(code="bad_request", detail=str(exc)[:300], pool_pid=os.getpid())
                )
            self.drop(conn)
            return
        try:
            self.handle(conn, msg, fds)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def handle(self, conn: Conn, msg: P.AnyPoolMsg, fds: list[int]) -> None:
        match msg:
            case P.Status():
                state = P.State(
                    pid=os.getpid(),
                    fingerprint=self.fingerprint,
                    workers=len(self.children),
                    idle_timeout_s=self.idle_s,
                    preloaded=self.preloaded,
                )
                self.reply(conn, state)
                self.drop(conn)
            case P.Stop():
                log("stop requested")
                self.drop(conn)
                self.running = False
            case P.Spawn() if conn.child is None:
                self.spawn(conn, msg, fds)
            case P.Release():
                self.drop(conn)
            case _:
                self.reply(
                    conn,
                    P.Refused(
                        code="bad_request",
                        detail=f"unexpected {type(msg).__name__}",
                        pool_pid=os.getpid(),
                    ),
                )
                self.drop(conn)

    def spawn(self, conn: Conn, msg: P.Spawn, fds: list[int]) -> None:
        refuse = None
        if msg.fingerprint != self.fingerprint:
            refuse = P.Refused(
                code="stale", detail="the pool runs other code", pool_pid=os.getpid()
            )
        elif len(fds) != 2 + msg.stdin:
            detail = f"{len(fds)} fds, want {2 + msg.stdin}"
            refuse = P.Refused(code="bad_request", detail=detail, pool_pid=os.getpid())
        elif pool_child.threads() != 1:
            detail = f"{pool_child.threads()} threads: refusing to fork"
            refuse = P.Refused(code="fork_failed", detail=detail, pool_pid=os.getpid())
        elif (limits := pool_child.kernel_limits(conn.kernel_pid)) is None:
            detail = "the kernel's resource limits cannot be given to a forked worker"
            refuse = P.Refused(code="fork_failed", detail=detail, pool_pid=os.getpid())
        if refuse is not None:
            self.reply(conn, refuse)
            self.drop(conn)
            return
        sys.stdout.flush()
        sys.stderr.flush()
        keep = self.owned_fds()
        pool_child.freeze()  # what the pool allocated since: not the child's to collect
        pid = os.fork()
        if pid == 0:
            keep.discard(conn.kernel_pidfd)
            pool_child.set_limits(limits)
            pool_child.become_worker(
                msg.module,
                msg.argv,
                msg.env,
                msg.cwd,
                fds,
                conn.kernel_pidfd,
                sorted(keep),
            )
        conn.child = pid
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn)
        self.sel.register(pidfd, selectors.EVENT_READ, "child")
        log(f"forked {msg.module} as pid {pid}")
        self.reply(conn, P.Spawned(pid=pid))

    def owned_fds(self) -> set[int]:
        fds = {self.listener.fileno(), *self.conns, *self.children, *self.private_fds}
        fds |= {c.kernel_pidfd for c in self.conns.values()}
        if self.sel.__class__.__name__ == "EpollSelector":
            fds.add(self.sel.fileno())  # type: ignore[attr-defined]
        return fds

    def child_exited(self, pidfd: int) -> None:
        """The worker exited: report it, keep it unreaped until its kernel releases it."""
        pid, conn = self.children[pidfd]
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        self.sel.unregister(pidfd)
        if conn is not None and conn.sock.fileno() in self.conns and info is not None:
            code = info.si_status if info.si_code == os.CLD_EXITED else None
            sig = info.si_status if info.si_code != os.CLD_EXITED else None
            self.reply(conn, P.Exited(pid=pid, exit_code=code, signal=sig))
            self.children[pidfd] = (pid, conn)
            self.exited.add(pid)
            return
        self.reap(pidfd)

    def reap(self, pidfd: int) -> None:
        pid, _ = self.children.pop(pidfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        self.exited.discard(pid)
        os.close(pidfd)

    def drop(self, conn: Conn) -> None:
        """Forget a connection; its worker is reaped if dead, else told its kernel left."""
        fd = conn.sock.fileno()
        if fd in self.conns:
            self.sel.unregister(conn.sock)
            del self.conns[fd]
        conn.sock.close()
        os.close(conn.kernel_pidfd)
        for pidfd, (pid, owner) in list(self.children.items()):
            if owner is conn:
                if pid in self.exited:
                    self.reap(pidfd)
                else:  # the kernel went away first: the worker kills its tree on SIGTERM
                    self.children[pidfd] = (pid, None)
                    with contextlib.suppress(OSError):
                        signal.pidfd_send_signal(pidfd, signal.SIGTERM)

    def reply(self, conn: Conn, msg: P.AnyPoolMsg) -> None:
        with contextlib.suppress(OSError):
            conn.sock.sendall(P.encode(msg))


def peer_allowed(uid: int) -> bool:
    """Only the pool's own user may ask it for anything."""
    return uid == _SELF


def read_frame(sock: socket.socket) -> tuple[P.AnyPoolMsg, list[int]]:
    """One frame and the fds that came with it; EOFError on a closed connection."""
    buf, fds = b"", []
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        if len(buf) >= 4 and struct.unpack(">I", buf[:4])[0] > P.MAX_FRAME:
            raise ValueError("frame too large")
        data, got, _flags, _addr = socket.recv_fds(sock, 65536, 4)
        fds += got
        if not data:
            for fd in fds:
                os.close(fd)
            raise EOFError("connection closed")
        buf += data
    return P.decode(buf[4:]), fds


def log(text: str) -> None:
    """The pool's log (its stderr, a file in its dir): pids and modules, never env or argv."""
    print(f"{time.strftime('%H:%M:%S')} pool {os.getpid()}: {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    # The commands live in pool_cli, which builds on this module: importing it only when run
    # as a program keeps the two out of an import cycle.
    from workers import pool_cli

    sys.exit(pool_cli.main(sys.argv[1:]))
