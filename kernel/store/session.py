"""A session: its directory, single-writer lock, event log, artifacts and redactor."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

import msgspec
import msgspec.inspect

from kernel.errors import SessionNotFound
from kernel.store.artifacts import Artifacts
from kernel.store.catalog import (
    HARNESS,
    SessionInfo,
    harness_refusal,
    is_session_id,
    list_sessions,
    read_created_by,
    sessions_home,
    status_of,
)
from kernel.store.commit import Commit
from kernel.store.durable import fsync_dir
from kernel.store.event_log import EventLog
from kernel.store.guard import check_session_dir, storage_error
from kernel.store.lock import SessionLock
from kernel.store.log_events import LogEvents
from kernel.store.modes import make_dir, tighten
from kernel.store.redact import Redactor
from kernel.store.staging import STAGING, discard_staging, sweep_staging
from kernel.store.workspace import check_workspace
from protocol.codec import encode_event, make_event
from protocol.events import KIND_OF, Data, ErrorData, Event, SessionData, ToolFinishedData

__all__ = ["Session", "SessionInfo", "list_sessions", "sessions_home"]

EventCallback = Callable[[Event], None]
LOG = "events.jsonl"
MAX_BACKLOG = 10_000  # records queued unannounced before an append waits for its round
# Synced in a round of their own at once, not with the next durable record: a tool's result
# (the agent projects and routes the next step meanwhile; kernel/store/commit.py).
SOON = (ToolFinishedData,)


class Session:
    """An open, locked session. Every append is redacted, persisted, then announced.

    Durable before visible: the subscriber hears of a record only once it is fsynced (see
    kernel/store/commit.py), a few milliseconds after `append` returns, in seq order, and
    always before `sync()` returns. `append(..., durable=True)` returns only then: the one
    form for a record that must be on the disk before an effect (`tool_started`).
    """

    def __init__(
        self,
        home: Path,
        directory: Path,
        lock: SessionLock,
        log: EventLog,
        events: LogEvents,
        redactor: Redactor,
        on_event: EventCallback | None,
    ) -> None:
        self.home = home
        self.directory = directory
        self.id = directory.name
        self.events = events
        self.redactor = redactor
        self.on_event = on_event
        self._lock = lock
        self._log = log
        self._commit = Commit(log, self._notify)
        # An artifact is fsynced (data and name) before any record appended after it is written.
        self.artifacts = Artifacts(directory, redactor, self._commit.hold)
        # seq order == file order == announcement order, whichever thread appends; re-entrant
        # because a subscriber may append in turn.
        self._appending = threading.RLock()
        self.workspace = Path(events[0].data.workspace)

    @classmethod
    def create(
        cls,
        home: Path,
        workspace: Path | str,
        on_event: EventCallback | None = None,
        secrets: Iterable[str] = (),
        created_by: str = "jmp",
    ) -> Session:
        """A new locked session bound to workspace; on failure nothing is left behind."""
        workspace = check_workspace(workspace)  # root, system dirs, non-UTF-8: refused
        home = Path(home).absolute()
        _make_home(home)
        session_id = uuid.uuid4().hex
        # Built under a hidden name and renamed: a crash never leaves a half session in the list.
        staging = home / f"{STAGING}{session_id}"
        lock = SessionLock(staging / "lock")
        log = EventLog(staging / LOG)
        final = home / session_id
        sweep_staging(home)  # what an earlier create that died or failed left behind
        try:
            _make_dir(staging)
            lock.acquire()  # at once: a staging dir whose lock is held is never swept
            for sub in ("artifacts", "terminal"):
                _make_dir(staging / sub)
            first = make_event(
                session_id,
                1,
                time.time(),
                SessionData(session_id=session_id, workspace=str(workspace), created_by=created_by),
            )
            events = log.create(first)
            try:
                fsync_dir(staging)  # its entries (the log, the lock, artifacts/) before its name
                staging.rename(final)
                fsync_dir(home)
            except OSError as exc:
                with contextlib.suppress(OSError):  # renamed, not durable: out of the list
                    final.rename(staging)
                raise storage_error("create the session directory", final, exc) from None
        except BaseException:
            log.close()
            lock.release()
            discard_staging(staging)
            raise
        # flock and the log's descriptor follow their inodes through the rename
        lock.path, log.path = final / "lock", final / LOG
        session = cls(home, final, lock, log, events, Redactor(tuple(secrets)), on_event)
        session._notify(first)
        return session

    @classmethod
    def open(
        cls,
        home: Path,
        session_id: str,
        on_event: EventCallback | None = None,
        secrets: Iterable[str] = (),
        harness: bool = False,
        verify: bool = False,
    ) -> Session:
        """Lock and load an existing session; a torn last line is archived and reported.

        A directory holding links or special files is refused before anything is written
        (SessionRefused), and so is a jev-harness session (UsageError naming `jev-harness
        inspect`: jmp does not continue task-script runs) unless `harness` (jev-harness's own
        inspect). On storage that refuses writes the session opens read-only (`read_only`): it
        can be read and replayed, and any append is a StorageError.

        Open reads the log's ends only (events.index, kernel/store/event_log.py): its time does
        not grow with history. `verify` checks every line first (what `jmp --verify` does).
        A session written with wider modes is made the owner's alone first, said once on
        stderr (kernel/store/modes.py); an events.index of an older format is rebuilt by a full
        check, said once on stderr too.
        """
        home = Path(home).absolute()
        if not cls.exists(home, session_id):
            raise SessionNotFound(f"no session {session_id!r} in {home}")
        directory = home / session_id
        check_session_dir(directory)
        if not harness and read_created_by(directory) == HARNESS:
            raise harness_refusal(session_id)  # before the lock: nothing is archived or added
        lock = SessionLock(directory / "lock").acquire(allow_read_only=True)
        log = EventLog(directory / LOG)
        try:
            if not lock.read_only:
                _tighten(directory)
            events = log.load(session_id, writable=not lock.read_only, verify=verify)
            assert isinstance(events, LogEvents)
            if log.older_index is not None and not lock.read_only:
                print(
                    f"jmp: note: session {session_id}'s events.index was of an older format "
                    f"({log.older_index}); rebuilt from its log once, by a full check",
                    file=sys.stderr,
                )
        except BaseException:
            log.close()
            lock.release()
            raise
        session = cls(home, directory, lock, log, events, Redactor(tuple(secrets)), on_event)
        for torn in log.torn:  # each archive's error record is durable before it is named
            if not torn.reported_by(session.events[-len(log.torn) :]):
                message = torn.describe()
                session.append(
                    ErrorData(stage="recall", error_class="TornRecord", message=message),
                    durable=True,
                )
            torn.finish()
        return session

    @staticmethod
    def exists(home: Path, session_id: str) -> bool:
        """Whether home holds a session with this id (no lock taken, no link followed: a link
        or a special file there exists, and opening it is refused with the reason)."""
        return is_session_id(session_id) and os.path.lexists(Path(home) / session_id / LOG)

    @property
    def read_only(self) -> bool:
        """Opened on storage that refuses writes: readable and replayable, never appended."""
        return self._lock.read_only

    @property
    def status(self) -> str:
        """The last final's status; "running" after a later request; "new" before any."""
        pairs = ((e.kind, getattr(e.data, "status", None)) for e in reversed(self.events))
        return status_of(pairs)

    def append(self, data: Data, durable: bool = False) -> Event:
        """Redact, keep, queue for the log; the subscriber hears of it once it is fsynced.

        With `durable` it is on the disk (and announced) when this returns: the form for a
        record that must survive a power cut before an effect. A StorageError (a full disk, a
        failed fsync: now or in an earlier round of the commit) stops the run for good.
        """
        clean = self._redact(data)
        with self._appending:
            if not self._lock.held:
                raise RuntimeError(f"session {self.id} is closed")
            self._commit.check()
            event = make_event(self.id, self._next_seq(), time.time(), clean)
            line = encode_event(event) + b"\n"
            self._log.note(event)  # the index's settled mark, in seq order before the write
            self._commit.add(event, line, soon=isinstance(clean, SOON))
            self.events.append(event)
        if durable or self._commit.backlog > MAX_BACKLOG:
            self._commit.sync()
        return event

    def emit(self, data: Data) -> Event:
        """A transient event (seq None): redacted and announced after the records appended
        before it, never persisted (dropped once the commit failed)."""
        event = make_event(self.id, None, time.time(), self._redact(data))
        self._commit.add(event, None)
        return event

    def sync(self) -> None:
        """Every record appended so far fsynced and announced (a run's end, a direct call's
        answer); StorageError naming the file when the disk refused it."""
        self._commit.sync()

    def _next_seq(self) -> int:
        last = self.events[-1].seq if self.events else 0
        return (last or 0) + 1

    def _redact(self, data: Data) -> Data:
        """Every string redacted but the fixed vocabulary of Literal fields (a status, a
        stage): a secret that spells one (an MCP env value "completed") must not make the
        record invalid, and those values are the protocol's, never a secret's."""
        kind = type(data)
        if kind not in KIND_OF:
            raise TypeError(f"not an event data struct: {kind.__name__}")
        plain = msgspec.to_builtins(data)
        clean = self.redactor.value(plain)
        for name in _literal_fields(kind):
            clean[name] = plain[name]
        return msgspec.convert(clean, kind)

    def _notify(self, event: Event) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception as exc:  # a subscriber must never stop persistence
            message = self.redactor.text(f"{type(exc).__name__}: {exc}")
            print(f"jmp: event subscriber failed on {event.kind}: {message}", file=sys.stderr)

    def close(self) -> None:
        """Sync what is queued, then close the log, the artifacts and the lock; idempotent.
        Raises a storage failure of the commit that no append or sync has reported yet."""
        try:
            self._commit.close()
        finally:
            self._log.close()
            self.artifacts.close()
            self._lock.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


@functools.cache
def _literal_fields(kind: type[Data]) -> tuple[str, ...]:
    """The encoded names of kind's fields whose type is a Literal (or an optional one)."""
    names = []
    info = msgspec.inspect.type_info(kind)
    assert isinstance(info, msgspec.inspect.StructType)
    for field in info.fields:
        types = field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else ()
        if isinstance(field.type, msgspec.inspect.LiteralType) or any(
            isinstance(t, msgspec.inspect.LiteralType) for t in types
        ):
            names.append(field.encode_name)
    return tuple(names)


def _tighten(directory: Path) -> None:
    """A session written with wider modes made the owner's alone, said once on stderr (the
    next open finds nothing to change); a refusal is said too, and the open goes on."""
    try:
        changed = tighten(directory)
    except OSError as exc:
        print(
            f"jmp: note: {storage_error('tighten the modes of', directory, exc)}", file=sys.stderr
        )
        return
    if changed:
        shown = ", ".join(changed[:6]) + (
            f" and {len(changed) - 6} more" if len(changed) > 6 else ""
        )
        print(
            f"jmp: note: session {directory.name} was open to other users; tightened to the "
            f"owner alone (0700 directories, 0600 files): {shown}",
            file=sys.stderr,
        )


def _make_home(home: Path) -> None:
    """The sessions directory and any missing parent, each made 0700 (kernel/store/modes.py)
    and fsynced into its parent (a power cut must not take back the directory of a session
    that was shown). An existing one is left as it is: the person chose it."""
    if home.is_dir():
        return
    missing = []
    for path in (home, *home.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    try:
        for path in reversed(missing):
            try:
                make_dir(path)
            except FileExistsError:  # made meanwhile (another jmp), or a file in the way
                if not path.is_dir():
                    raise
            fsync_dir(path.parent)
        if not missing and not home.is_dir():
            make_dir(home)  # a file (or a dangling link) in the way: the error names it
    except OSError as exc:
        raise storage_error("create the sessions directory", home, exc) from None


def _make_dir(path: Path) -> None:
    try:
        make_dir(path)
    except OSError as exc:
        raise storage_error("create the session directory", path, exc) from None
