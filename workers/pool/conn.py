"""The warm pool's connections: accepting, framing, deadlines and replies. No request is
understood here (`workers/pool/server.py` handles them).

Only the pool's own uid may connect (SO_PEERCRED). Sockets are non-blocking and framed per
connection, so no client stalls the others: a client has FRAME_S from its connect, or from a
frame's first byte, to send the whole frame, else it is dropped. Every fd received belongs to
its connection until a request takes it, and is closed with it. Out of descriptors at accept,
the pool gives up a reserve descriptor to accept and close the waiting connection, and pauses
accepting for PAUSE_S if even that fails, instead of exiting or spinning.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

import msgspec

from protocol import pool as P

SELF_UID = os.getuid()  # who may connect (and own the pool's directory)
FRAME_S = 5.0  # a client's whole frame, from its connect or its first byte
PAUSE_S = 0.2  # out of descriptors even for the reserve: stop accepting this long
MAX_FDS = 16  # a Spawn carries 3 + stdin + one per namespace


@dataclass
class Conn:
    sock: socket.socket
    kernel_pidfd: int
    kernel_pid: int = 0
    buf: bytearray = field(default_factory=bytearray)
    fds: list[int] = field(default_factory=list)  # received, not yet handed to a request
    deadline: float | None = None  # for the frame being read; None while a worker serves it
    child: int | None = None  # pid of the worker forked for this connection
    child_pidfd: int | None = None
    sync: int | None = None  # the starting fork's report pipe (read end)
    module: str = ""  # what it runs
    closed: bool = False


class Connections:
    """The listener and its clients; `handle` and `refuse` are the owner's."""

    # Every deadline and idle time of the pool is read from this one clock (a test ages an
    # idle pool through it instead of waiting).
    clock = staticmethod(time.monotonic)

    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.conns: dict[int, Conn] = {}  # socket fd -> connection
        self.reserve: int | None = _reserve_fd()  # given up to refuse a connection at EMFILE
        self.paused_until: float | None = None

    def handle(self, conn: Conn, msg: P.AnyPoolMsg, fds: list[int]) -> None:
        raise NotImplementedError

    def refuse(self, conn: Conn, code: P.RefuseCode, detail: str) -> None:
        raise NotImplementedError

    def listen(self, listener: socket.socket) -> None:
        self.listener = listener
        listener.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, "accept")

    def expire(self, now: float) -> None:
        """Drop every client whose frame is late; resume accepting after a pause."""
        for conn in [c for c in self.conns.values() if c.deadline and c.deadline <= now]:
            log(f"dropped a client (pid {conn.kernel_pid}): no whole frame in {FRAME_S:g} s")
            self.drop(conn)
        if self.paused_until is not None and now >= self.paused_until:
            self.paused_until = None
            self.sel.register(self.listener, selectors.EVENT_READ, "accept")

    def accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:
            self.out_of_fds(exc)
            return
        sock.setblocking(False)
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
        conn = Conn(sock, pidfd, kernel_pid=pid, deadline=self.clock() + FRAME_S)
        self.conns[sock.fileno()] = conn
        self.sel.register(sock, selectors.EVENT_READ, "conn")

    def out_of_fds(self, exc: OSError) -> None:
        """accept(2) failed: at EMFILE the waiting client gets a closed connection (through the
        reserve descriptor), never a pool that exits or spins on a readable listener."""
        if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            log(f"accept failed: {exc.strerror}")
            return
        if self.reserve is not None:
            os.close(self.reserve)
            with contextlib.suppress(OSError):
                self.listener.accept()[0].close()
            self.reserve = _reserve_fd()
            log("out of file descriptors: refused a connection")
        if self.reserve is None and self.paused_until is None:
            self.sel.unregister(self.listener)
            self.paused_until = self.clock() + PAUSE_S

    def readable(self, conn: Conn) -> None:
        try:
            data, fds, flags, _addr = socket.recv_fds(conn.sock, 65536, MAX_FDS)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(conn)
            return
        conn.fds += fds
        if flags & socket.MSG_CTRUNC:
            self.refuse(conn, "bad_request", f"more than {MAX_FDS} descriptors (or none free)")
            return
        if not data:
            self.drop(conn)
            return
        if not conn.buf and conn.child is not None:
            conn.deadline = self.clock() + FRAME_S  # a frame after the spawn (Release)
        conn.buf += data
        while len(conn.buf) >= 4 and conn.sock.fileno() in self.conns:
            size = struct.unpack(">I", conn.buf[:4])[0]
            if size > P.MAX_FRAME:
                self.refuse(conn, "bad_request", "frame too large")
                return
            if len(conn.buf) < 4 + size:
                return
            body = bytes(conn.buf[4 : 4 + size])
            del conn.buf[: 4 + size]
            fds, conn.fds = conn.fds, []
            if conn.child is not None and not conn.buf:
                conn.deadline = None
            try:
                msg = P.decode(body)
            except (ValueError, msgspec.DecodeError) as exc:
                close_fds(fds)
                self.refuse(conn, "bad_request", str(exc)[:300])
                return
            try:
                self.handle(conn, msg, fds)
            finally:
                close_fds(fds)  # a fork has its own copies; the pool keeps none

    def drop(self, conn: Conn) -> None:
        """Close a connection and every fd it sent. Idempotent."""
        if conn.closed:
            return
        conn.closed = True
        fd = conn.sock.fileno()
        if fd in self.conns:
            self.sel.unregister(conn.sock)
            del self.conns[fd]
        close_fds(conn.fds)
        conn.fds = []
        conn.sock.close()
        with contextlib.suppress(OSError):
            os.close(conn.kernel_pidfd)

    def reply(self, conn: Conn, msg: P.AnyPoolMsg) -> None:
        """Best effort, never blocking: a client that reads nothing loses its answer."""
        with contextlib.suppress(OSError):
            conn.sock.send(P.encode(msg), socket.MSG_DONTWAIT)


def peer_allowed(uid: int) -> bool:
    """Only the pool's own user may ask it for anything."""
    return uid == SELF_UID


def _reserve_fd() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def read_frame(sock: socket.socket) -> tuple[P.AnyPoolMsg, list[int]]:
    """One frame and the fds that came with it (a blocking client's read); EOFError on a closed
    connection. Every fd received is closed on any error."""
    buf, fds = b"", []
    try:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            if len(buf) >= 4 and struct.unpack(">I", buf[:4])[0] > P.MAX_FRAME:
                raise ValueError("frame too large")
            data, got, _flags, _addr = socket.recv_fds(sock, 65536, MAX_FDS)
            fds += got
            if not data:
                raise EOFError("connection closed")
            buf += data
        return P.decode(buf[4:]), fds
    except BaseException:
        close_fds(fds)
        raise


def log(text: str) -> None:
    """The pool's log (its stderr, a file in its dir): pids and codes, never env or argv."""
    print(f"{time.strftime('%H:%M:%S')} pool {os.getpid()}: {text}", file=sys.stderr, flush=True)
