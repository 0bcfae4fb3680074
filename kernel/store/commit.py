"""Durable before visible: one session's group commit (issue 21).

A subscriber (the CLI's printer, `on_event`, ACP) hears of a record only once an fsync of the
log has covered it, so a power cut never takes back what was printed, and no `seq` that was
shown is ever used again for another record. Records are not fsynced one by one: `add`
queues a record's encoded line, and a *round* (run by the session's commit thread, or at once
by `sync()` for a record that must be durable before an effect) does, in this order:

1. fsync the artifacts held since the last round, their data and their directories, all in
   parallel: a line written to the log may reach the disk at any moment, synced or not, so no
   record is written before the files it names are durable;
2. write every queued line to the log, in seq order;
3. fsync the log, once for them all;
4. hand the records it covered to the subscriber, in order; transient records (seq null)
   go in their place, after the records queued before them.

When the commit thread runs a round: at once for a record added `soon` (a tool's result: it
is synced while the agent projects and routes the next step) or a transient one with nothing
unwritten before it; otherwise a record waits for a round that something else starts (a
durable record's `sync` before an effect, a run's end, a soon record) but never more than
GATHER_S. So a step's route and generation records share the fsync of its `tool_started`
instead of one fsync each on the two cores the models' workers need.

What is appended while a round runs waits for the next one: one fsync covers it all. A
failed write or fsync stops the session for good: Linux may have dropped the pages of a
failed fsync (a retry that succeeds proves nothing), so every later `add`, `hold` and `sync`
raises a StorageError naming the file, and nothing queued behind the failure is ever shown.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from kernel.errors import JmpError, LogReplaced, StorageError
from kernel.store.event_log import EventLog
from kernel.store.guard import storage_error
from protocol.events import Event

if TYPE_CHECKING:  # imported with the first round that holds files (it loads logging)
    from concurrent.futures import ThreadPoolExecutor

STOPPED = "; the run stopped: nothing after it was recorded or shown"
# Linux may drop the pages of a failed fsync: a later fsync that succeeds proves nothing.
LOST = "; its data may be lost (no record names it)" + STOPPED
# A record nobody hurries waits at most this long for its round (what it shows is no more
# than this late; on an idle machine a step is shorter, so its records share one fsync).
GATHER_S = 0.05
_pool: ThreadPoolExecutor | None = None  # parallel fsyncs of one round, shared by sessions
_pool_lock = threading.Lock()


class _Item:
    """A queued record: its line (None when transient) and the artifacts it waits for."""

    __slots__ = ("durable", "event", "generation", "line")

    def __init__(self, event: Event, line: bytes | None, generation: int) -> None:
        self.event = event
        self.line = line
        self.generation = generation  # artifacts held before it, all durable before its write
        self.durable = line is None  # a transient record waits for nothing but its turn


class _Held:
    """An artifact written (and renamed) but not yet fsynced: its data and its directory."""

    __slots__ = ("dir_fd", "fd", "path")

    def __init__(self, fd: int, dir_fd: int, path: Path) -> None:
        self.fd, self.dir_fd, self.path = fd, dir_fd, path


class Commit:
    """The group commit of one session's log; `deliver` is the session's announcement."""

    def __init__(self, log: EventLog, deliver: Callable[[Event], None]) -> None:
        self._log = log
        self._deliver = deliver
        self._cond = threading.Condition()  # guards the queue, the held files, the counters
        self._rounds = threading.RLock()  # one round at a time; re-entrant: a subscriber syncs
        self._queue: deque[_Item] = deque()
        self._held: list[_Held] = []
        self._generation = 0  # artifacts held so far
        self._added = 0
        self._delivered = 0
        self._failure: str | None = None
        self._failure_class: type[JmpError] = StorageError  # LogReplaced stays LogReplaced
        self._reported = False  # the failure was raised to a caller
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._unwritten = 0  # queued lines no round has written yet
        self._oldest = 0.0  # when the oldest of them was added (monotonic)
        self._hurry = False  # the commit thread runs a round now, not at the gather deadline

    # --- the appending side ---------------------------------------------------------

    def add(self, event: Event, line: bytes | None, soon: bool = False) -> None:
        """Queue a record (its encoded line, or None for a transient one), in seq order; its
        announcement follows the fsync that covers it, in a round started now when `soon`,
        else within GATHER_S (the module docstring). StorageError once the commit failed (a
        transient record is then dropped silently)."""
        with self._cond:
            if self._failure is not None:
                if line is None:
                    return
                self._raise()
            self._queue.append(_Item(event, line, self._generation))
            self._added += 1
            if line is not None:
                if not self._unwritten:
                    self._oldest = time.monotonic()
                self._unwritten += 1
            if soon or not self._unwritten:  # a transient with nothing to wait for goes now
                self._hurry = True
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(target=self._run, daemon=True, name="jmp-commit")
                self._thread.start()
            self._cond.notify_all()

    def hold(self, fd: int, dir_fd: int, path: Path) -> None:
        """Take over an artifact's open descriptor (closed here): its data and its directory
        entry are fsynced before any record added after this call is written."""
        with self._cond:
            if self._failure is not None:
                os.close(fd)
                self._raise()
            if not self._stopping:
                self._held.append(_Held(fd, dir_fd, path))
                self._generation += 1
                return
        _fsync_all([_Held(fd, dir_fd, path)])  # after close: durable at once, nothing to wait

    @property
    def backlog(self) -> int:
        """Records queued and not yet announced."""
        return self._added - self._delivered

    def check(self) -> None:
        """StorageError when the commit failed (nothing more may be recorded)."""
        with self._cond:
            if self._failure is not None:
                self._raise()

    def sync(self) -> None:
        """Block until every record added so far is durable and announced; StorageError
        naming the file when a write or fsync failed (now or in an earlier round)."""
        with self._rounds:
            with self._cond:
                target = self._added
            while True:
                with self._cond:
                    if self._failure is not None:
                        self._raise()
                    if self._delivered >= target:
                        return
                self._round()

    def close(self) -> None:
        """Sync, then stop the commit thread; idempotent. Raises a failure nobody was told of
        yet (a round of the commit thread that failed while the run waited)."""
        try:
            with self._cond:
                failed, self._stopping = self._failure is not None, True
                self._cond.notify_all()
            if not failed:
                self.sync()
                if self._held:  # artifacts no record named: synced, so none is left open
                    with self._rounds:
                        self._round()
        finally:
            thread, self._thread = self._thread, None
            if thread is not None and thread is not threading.current_thread():
                thread.join()
            with self._cond:
                held, self._held = self._held, []
                unreported = self._failure is not None and not self._reported
            for item in held:
                with contextlib.suppress(OSError):
                    os.close(item.fd)
        if unreported:
            with self._cond:
                self._raise()

    # --- rounds ---------------------------------------------------------------------

    def _run(self) -> None:
        """The commit thread: a round when one is hurried, or when the oldest unwritten line
        has waited GATHER_S; until close()."""
        while True:
            with self._cond:
                while not self._stopping:
                    if self._hurry:
                        break
                    if self._unwritten:  # nobody hurries it: at the latest at the deadline
                        left = self._oldest + GATHER_S - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    else:
                        self._cond.wait()
                if self._failure is not None or (self._stopping and not self._queue):
                    return
            try:
                with self._rounds:
                    self._round()
            except JmpError:
                return  # recorded: the next add or sync raises it

    def _round(self) -> None:
        """Artifacts, lines, one fsync, announcements (the module docstring). The caller holds
        `_rounds`."""
        with self._cond:
            if self._failure is not None:
                self._raise()
            held, self._held = self._held, []
            generation = self._generation  # every artifact held so far is synced below
            lines = []
            for item in self._queue:
                if item.durable or item.line is None:
                    continue
                if item.generation > generation:
                    break
                lines.append(item)
            self._unwritten -= len(lines)
            self._hurry = False
            if self._unwritten:  # added after the lines it takes: their wait starts now
                self._oldest = time.monotonic()
        try:
            _fsync_all(held)
        except JmpError as exc:
            self._fail(exc, LOST)
        try:
            for item in lines:
                assert item.line is not None
                self._log.write(item.line, item.event.kind)
        except LogReplaced as exc:
            self._fail(exc, "")  # it says what stopped, and that nothing more was written
        except JmpError as exc:  # a full disk: the line was cut back
            self._fail(exc, STOPPED)
        try:
            if lines:
                self._log.sync()
        except JmpError as exc:  # it says what became of the lines it could not sync
            self._fail(exc, STOPPED)
        with self._cond:
            for item in lines:
                item.durable = True
        self._announce()

    def _announce(self) -> None:
        """Hand every durable record at the front of the queue to the subscriber, one at a
        time (a subscriber that appends and syncs in turn announces what follows)."""
        while True:
            with self._cond:
                if self._failure is not None or not self._queue or not self._queue[0].durable:
                    return
                item = self._queue.popleft()
                self._delivered += 1
                self._cond.notify_all()
            self._deliver(item.event)

    def _fail(self, exc: JmpError, why: str) -> NoReturn:
        """Stop for good and raise: nothing queued is ever shown (it may not be on the disk)."""
        with self._cond:
            if self._failure is None:
                self._failure, self._failure_class = str(exc) + why, type(exc)
            self._queue.clear()
            self._unwritten = 0
            self._cond.notify_all()
            self._raise()

    def _raise(self) -> NoReturn:
        """Raise the failure (the caller holds `_cond`)."""
        self._reported = True
        raise self._failure_class(self._failure)


def _fsync_all(held: list[_Held]) -> None:
    """fsync each file and each of their directories, in parallel, then close the files; a
    StorageError names the first path that failed (every descriptor is closed either way)."""
    if not held:
        return
    dirs = {item.dir_fd: item.path.parent for item in held}
    jobs: list[tuple[int, Path]] = [(item.fd, item.path) for item in held]
    jobs += list(dirs.items())
    try:
        first, rest = jobs[0], jobs[1:]
        futures = [_executor().submit(_fsync, fd, path) for fd, path in rest]
        problems = [_fsync(*first)]
        problems += [future.result() for future in futures]
    finally:
        for item in held:
            with contextlib.suppress(OSError):
                os.close(item.fd)
    failed = next((p for p in problems if p is not None), None)
    if failed is not None:
        raise failed


def _fsync(fd: int, path: Path) -> StorageError | None:
    try:
        os.fsync(fd)
    except OSError as exc:
        return storage_error("fsync", path, exc)
    return None


def _executor() -> ThreadPoolExecutor:
    global _pool
    from concurrent.futures import ThreadPoolExecutor

    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="jmp-fsync")
        return _pool
