"""The warm worker pool: a per-user process that has imported the workers' SDKs and forks a
fresh worker per kernel request.

    python -m workers.pool start | stop | status     (JMP_WARM_DIR, JMP_WARM_IDLE_S apply)
    python -m workers.pool serve DIR [--idle S] [--preload KINDS] [--detach]

It holds nothing of value: it never opens a session and never sees a prompt, a model request, a
kernel's environment or its keys (they reach the forked worker on a pipe the pool passes along
unread), so a kill at any moment costs nothing (kernels fall back to a cold spawn) and no fork
inherits another kernel's secrets. It serves only its own uid (SO_PEERCRED), only kernels with
its code fingerprint and its own confinement view (credentials, capabilities, no_new_privs,
seccomp, LSM label, namespaces: read from the kernel's /proc entry; root directory and Landlock
domain: read through the kernel's probe, a child of the kernel; only securebits, which no other
process can read, come from the request), forks only jmp's worker modules and only while it has
exactly one OS thread; a fork takes on its kernel's resource limits, umask, priority, CPU set
and cgroup before the pool says `Spawned`. It reaps a worker only after its kernel has killed
that worker's tree (Release or a closed connection), so the worker's pid cannot be reused
before then. No client can stall it (`workers/pool/conn.py`). It exits after `--idle` seconds
with no connection and no live worker, and, idle, within INSTALL_CHECK_S of its installation
being removed (host/pool.py `installation_gone`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
from pathlib import Path

from host import confinement as C
from host import landlock as L
from host import pool as H
from protocol import pool as P
from workers.pool import child as pool_child
from workers.pool import takeon as pool_takeon
from workers.pool.conn import Conn, Connections, log

LOCK_WAIT_S = 10.0
START_S = 5.0  # a fork's take-on of its kernel's limits and cgroup, and its environment read


class Pool(Connections):
    def __init__(
        self,
        directory: Path,
        idle_s: float,
        preloaded: list[str],
        modules: tuple[str, ...] = P.WORKER_MODULES,
    ) -> None:
        self.dir, self.idle_s, self.preloaded = directory, idle_s, preloaded
        self.modules = frozenset(modules)
        self.fingerprint = H.code_fingerprint()
        self.view = C.own_view()
        self.spaces = C.namespaces()
        self.space_ids = {name: _ns_id(f"/proc/self/ns/{name}") for name in self.spaces}
        self.key = C.view_key(self.view, self.spaces)
        self.probe: L.Probe | None = None  # ours, named in our title (host/landlock.py)
        super().__init__()
        self.children: dict[int, tuple[int, Conn | None]] = {}  # pidfd -> (pid, its kernel)
        self.exited: set[int] = set()  # pids that exited and wait for Release
        self.last_active = self.clock()
        self.next_check = self.last_active + H.INSTALL_CHECK_S
        self.running = True

    def serve(self, listener: socket.socket) -> None:
        """Serve until idle, Stop or SIGTERM; and until our Landlock probe exits: without it
        no kernel could tell our domain."""
        self.listen(listener)
        if self.probe is not None:
            self.sel.register(os.pidfd_open(self.probe.pid), selectors.EVENT_READ, "probe")
        while self.running:
            now = self.clock()
            busy = self.conns or self.children
            if not busy and now >= self.last_active + self.idle_s:
                log("idle timeout: exiting")
                return
            if not busy and now >= self.next_check:
                self.next_check = now + H.INSTALL_CHECK_S
                gone = H.installation_gone()
                if gone:
                    log(f"installation gone ({gone}): exiting")
                    return
            wakes = [c.deadline for c in self.conns.values() if c.deadline is not None]
            wakes += [] if busy else [self.last_active + self.idle_s, self.next_check]
            wakes += [self.paused_until] if self.paused_until is not None else []
            wait = max(0.0, min(wakes) - now) if wakes else None
            ready = self.sel.select(wait)
            if not busy and self.clock() >= self.last_active + self.idle_s:
                log("idle timeout: exiting")  # a request at the deadline finds the pool gone
                return
            for key, _ in ready:
                kind = key.data
                if kind == "accept":
                    self.accept()
                elif kind == "probe":
                    log("the Landlock probe exited: exiting")
                    return
                elif kind == "child":
                    self.child_exited(key.fd)
                elif isinstance(kind, Conn):  # a starting fork's report
                    self.started(kind)
                elif key.fd in self.conns:
                    self.readable(self.conns[key.fd])
            self.expire(self.clock())
            self.last_active = self.clock() if (self.conns or self.children) else self.last_active

    def expire(self, now: float) -> None:
        """A fork that has not reported in START_S is killed, its request refused."""
        for conn in [c for c in self.conns.values() if c.deadline and c.deadline <= now]:
            if conn.sync is not None:
                self.fail_start(conn, "fork_failed", f"the worker did not start in {START_S:g} s")
        super().expire(now)

    def handle(self, conn: Conn, msg: P.AnyPoolMsg, fds: list[int]) -> None:
        match msg:
            case P.Status():
                state = P.State(
                    pid=os.getpid(),
                    view=self.key,
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
                self.refuse(conn, "bad_request", f"unexpected {type(msg).__name__}")

    def spawn(self, conn: Conn, msg: P.Spawn, fds: list[int]) -> None:
        want = 3 + msg.stdin + len(msg.namespaces) + msg.proof
        if msg.fingerprint != self.fingerprint:
            return self.refuse(conn, "stale", "the pool runs other code")
        if msg.module not in self.modules:
            return self.refuse(conn, "module", f"{msg.module[:100]!r} is not a jmp worker")
        if len(fds) != want:
            return self.refuse(conn, "bad_request", f"{len(fds)} fds, want {want}")
        if pool_child.threads() != 1:
            detail = f"{pool_child.threads()} threads: refusing to fork"
            return self.refuse(conn, "fork_failed", detail)
        problem = self.other_view(conn, msg, fds[3 + msg.stdin : want - msg.proof])
        if problem is None and not (msg.proof and self.proved(fds[-1])):
            problem = "the kernel's Landlock domain is not the pool's: it sent no proof"
        kernel = pool_takeon.read_kernel(conn.kernel_pid)
        if problem is None and kernel is None:
            problem = "the kernel's limits, priority or cgroup cannot be read"
        if problem is None and _readable(conn.kernel_pidfd):
            problem = "the kernel exited"  # what was read may belong to a reused pid
        if problem is not None or kernel is None:
            return self.refuse(conn, "confined", problem or "")
        sync_r, sync_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pool_child.freeze()  # what the pool allocated since: not the child's to collect
        pid = os.fork()
        if pid == 0:
            os.close(sync_r)
            pool_child.become_worker(msg, fds, conn.kernel_pidfd, kernel, sync_w)
        os.close(sync_w)
        conn.child, conn.child_pidfd, conn.sync = pid, os.pidfd_open(pid), sync_r
        conn.module = msg.module
        conn.deadline = self.clock() + START_S
        self.sel.register(sync_r, selectors.EVENT_READ, conn)
        return None

    def other_view(self, conn: Conn, msg: P.Spawn, spaces: list[int]) -> str | None:
        """Why the kernel's confinement is not the pool's (read from its /proc entry, its
        probe's and the namespace fds it sent; securebits from the request); None when they
        are the same."""
        try:
            view = C.confinement(conn.kernel_pid)
        except OSError as exc:
            return f"the kernel's /proc status cannot be read: {exc.strerror}"
        view["securebits"] = str(msg.securebits)
        domain, view["root"] = self.probed(conn, msg)
        for name, mine in self.view.items():
            if view[name] != mine:
                return f"the kernel's {name} is {view[name]!r}, the pool's {mine!r}"
        if sorted(msg.namespaces) != sorted(self.spaces):
            theirs = ", ".join(msg.namespaces)
            return f"the kernel sent namespaces [{theirs}], the pool has {sorted(self.spaces)}"
        for name, fd in zip(msg.namespaces, spaces, strict=True):
            try:
                their_id = _ns_id(fd)
                link = os.readlink(f"/proc/{conn.kernel_pid}/ns/{name}")
            except PermissionError:  # non-dumpable to us: the fd it holds is the proof
                link = self.spaces[name]
            except OSError as exc:
                return f"the kernel's {name} namespace cannot be read: {exc.strerror}"
            if their_id != self.space_ids[name] or link != self.spaces[name]:
                return f"the kernel's {name} namespace is not the pool's"
        return f"the kernel's Landlock domain is not the pool's: {domain}" if domain else None

    def probed(self, conn: Conn, msg: P.Spawn) -> tuple[str, str]:
        """(why the kernel's Landlock domain is not known to be ours, '' when it is; its root
        directory, read through its probe, else ours, compared later): `host/landlock.py`.
        The kernel proves its direction by sending our probe's hidden working directory
        (`proved`), we ours by reading its probe, a child of the kernel alive until our
        answer."""
        if msg.probe <= 0:
            return "it sent no probe", self.view["root"]
        domain = L.inspect(msg.probe, conn.kernel_pid)
        if domain:
            return domain, self.view["root"]
        try:
            return "", C.root_of(msg.probe)
        except OSError as exc:
            return f"its probe's root directory cannot be read ({exc.strerror})", self.view["root"]

    def proved(self, fd: int) -> bool:
        """Is `fd` our probe's hidden working directory, which only a process that may
        ptrace-read our probe (our Landlock domain or an enclosing one) could open?"""
        try:
            return self.probe is not None and self.probe.proves(fd)
        except OSError:
            return False

    def started(self, conn: Conn) -> None:
        """The fork reported: it took on its kernel's settings (b"ok"), or why it could not."""
        assert conn.sync is not None and conn.child is not None and conn.child_pidfd is not None
        try:
            report = os.read(conn.sync, 4096)
        except OSError:
            report = b""
        if report != b"ok":
            text = report.decode("utf-8", "replace")
            if text.startswith("confined:"):
                return self.fail_start(conn, "confined", text.removeprefix("confined:"))
            return self.fail_start(conn, "fork_failed", text or "the fork exited")
        self.sel.unregister(conn.sync)
        os.close(conn.sync)
        conn.sync = None
        conn.deadline = None if not conn.buf else conn.deadline
        self.children[conn.child_pidfd] = (conn.child, conn)
        self.sel.register(conn.child_pidfd, selectors.EVENT_READ, "child")
        log(f"forked {conn.module} as pid {conn.child} for pid {conn.kernel_pid}")
        self.reply(conn, P.Spawned(pid=conn.child))
        return None

    def fail_start(self, conn: Conn, code: P.RefuseCode, detail: str) -> None:
        """The fork could not become the worker: kill and reap it, refuse the request."""
        self.kill_start(conn)
        self.refuse(conn, code, detail.strip()[:300])

    def kill_start(self, conn: Conn) -> None:
        """Kill and reap a fork that has not reported yet."""
        if conn.sync is None or conn.child is None or conn.child_pidfd is None:
            return
        self.sel.unregister(conn.sync)
        os.close(conn.sync)
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(conn.child_pidfd, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(conn.child, 0)
        os.close(conn.child_pidfd)
        conn.sync = conn.child = conn.child_pidfd = None

    def child_exited(self, pidfd: int) -> None:
        """The worker exited: report it, keep it unreaped until its kernel releases it."""
        pid, conn = self.children[pidfd]
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        self.sel.unregister(pidfd)
        if conn is not None and conn.sock.fileno() in self.conns and info is not None:
            code = info.si_status if info.si_code == os.CLD_EXITED else None
            sig = info.si_status if info.si_code != os.CLD_EXITED else None
            self.reply(conn, P.Exited(pid=pid, exit_code=code, signal=sig))
            self.exited.add(pid)
            return
        self.reap(pidfd)

    def reap(self, pidfd: int) -> None:
        pid, _ = self.children.pop(pidfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        self.exited.discard(pid)
        os.close(pidfd)

    def refuse(self, conn: Conn, code: P.RefuseCode, detail: str) -> None:
        log(f"refused a request of pid {conn.kernel_pid}: {code}")
        self.reply(conn, P.Refused(code=code, detail=detail, pool_pid=os.getpid()))
        self.drop(conn)

    def drop(self, conn: Conn) -> None:
        """Forget a connection and every fd it sent; its worker is reaped if dead, killed if
        still starting, else told its kernel left. Idempotent."""
        if conn.closed:
            return
        self.kill_start(conn)  # a fork still starting: nobody waits for it now
        super().drop(conn)
        for pidfd, (pid, owner) in list(self.children.items()):
            if owner is conn:
                if pid in self.exited:
                    self.reap(pidfd)
                else:  # the kernel went away first: the worker kills its tree on SIGTERM
                    self.children[pidfd] = (pid, None)
                    with contextlib.suppress(OSError):
                        signal.pidfd_send_signal(pidfd, signal.SIGTERM)


def _ns_id(what: int | str) -> tuple[int, int]:
    """A namespace's identity (device, inode) from an fd or a /proc/PID/ns path."""
    st = os.fstat(what) if isinstance(what, int) else os.stat(what)
    return st.st_dev, st.st_ino


def _readable(fd: int) -> bool:
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
