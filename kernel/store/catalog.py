"""Where sessions live and a fast listing of them. Stdlib only: `jmp --list` imports just this.

The listing reads the first line and the tail of each log, never the whole of a long log, takes
no lock and never writes.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kernel.errors import UsageError
from kernel.store.context_blocks import without_context
from protocol.lines import SessionRow

SESSION_ID = re.compile(r"[0-9a-f]{32}")
HEAD_BYTES = 64 * 1024  # a first user request longer than this is read line by line
TAIL_BYTES = 64 * 1024  # doubled until a line that decides the status is found
TITLE_CHARS = 80
# Kinds after which the session's status is decided, reading the log backwards.
_DECIDING = ("final", "user", "run_started")
_DECODER = json.JSONDecoder()


def sessions_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--sessions-dir, else $JMP_SESSIONS_DIR, else the installation's default (not created):
    PROJECT/.jmp/sessions in a checkout, $XDG_DATA_HOME/jmp/sessions for an installed copy
    (kernel/config/install.py)."""
    from kernel.config.install import default_sessions_dir

    chosen = explicit or os.environ.get("JMP_SESSIONS_DIR") or default_sessions_dir()
    return Path(chosen).expanduser().absolute()


def is_session_id(value: str) -> bool:
    return bool(SESSION_ID.fullmatch(value))


def status_of(kinds_newest_first: Iterable[tuple[str, str | None]]) -> str:
    """Status from (kind, final status) pairs, newest first: the last final, or new/running."""
    for kind, final_status in kinds_newest_first:
        if kind == "final":
            return final_status or "error"
        if kind in ("user", "run_started"):
            return "running"  # started after the last final and not ended (or killed)
    return "new"


SessionInfo = SessionRow  # one row of `jmp --list` (its one definition: protocol/lines.py)


def list_sessions(home: Path) -> list[SessionInfo]:
    """Every session under home, most recent activity first; unreadable ones say so."""
    try:
        entries = [e for e in os.scandir(home) if SESSION_ID.fullmatch(e.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    infos = []
    for entry in entries:
        # A session directory that is a link is refused on open: listed as unreadable.
        info = _unreadable(entry.name) if entry.is_symlink() else read_info(entry.path)
        if info is not None:
            infos.append(info)
    infos.sort(key=lambda i: i.last_activity or 0.0, reverse=True)
    return infos


def read_info(directory: str | os.PathLike[str]) -> SessionInfo | None:
    """The listing row of one session directory, or None if it holds no log."""
    # Plain os calls on str paths: this runs a thousand times inside a 3x-of-startup budget.
    directory = os.fspath(directory)
    session_id = os.path.basename(directory)
    try:
        fd = open_log(directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):  # a link, a FIFO, a device: damaged, never followed
        return _unreadable(session_id)
    try:
        return _summarize(session_id, fd)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return _unreadable(session_id)
    finally:
        os.close(fd)


def _unreadable(session_id: str) -> SessionInfo:
    return SessionInfo(session_id, "", "unreadable", None, 0, "")


def open_log(directory: str | os.PathLike[str]) -> int:
    """A read descriptor of DIRECTORY/events.jsonl; a link or a non-regular file (a FIFO would
    block a plain open forever) raises, nothing is followed (issue 9, items 8 and 11)."""
    path = os.path.join(directory, "events.jsonl")
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file")
    return fd


def _first_record(directory: Path) -> dict[str, Any]:
    fd = open_log(directory)
    with os.fdopen(fd, "rb") as f:
        return _loads(f.readline())


def read_workspace(directory: Path) -> str:
    """The workspace the session is bound to, from its first record."""
    return str(_first_record(directory)["data"]["workspace"])


HARNESS = "jev-harness"  # the `created_by` of a task-script run's session


def harness_refusal(session_id: str) -> UsageError:
    """Why jmp's own openings (the CLI, ACP, the Python API's Session.open) refuse a jev-harness
    session: jmp does not continue task-script runs."""
    return UsageError(
        f"session {session_id} is a jev-harness run: see it with "
        f"`jev-harness inspect {session_id}` (jmp does not continue task-script runs)"
    )


def read_created_by(directory: Path) -> str:
    """Which front end created the session ("jmp", "jev-harness"); "jmp" when unreadable."""
    try:
        return str(_first_record(directory)["data"].get("created_by") or "jmp")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "jmp"


def _summarize(session_id: str, fd: int) -> SessionInfo:
    size = os.fstat(fd).st_size
    head = os.read(fd, HEAD_BYTES)
    first = _loads(head[: head.index(b"\n")])
    title = _title(head, fd)
    whole = size <= len(head)
    tail = head if whole else _read_tail(fd, size, TAIL_BYTES)
    lines = _complete_lines_backwards(tail, whole)
    last = _loads(next(lines))
    kinds = [(last["kind"], last["data"].get("status"))]
    if last["kind"] not in _DECIDING:
        kinds += _deciding_kinds(lines, fd, size)
    return SessionInfo(
        session_id=session_id,
        workspace=first["data"]["workspace"],
        status=status_of(kinds),
        last_activity=last.get("time"),
        events=int(last["seq"]),  # seq counts from 1 without gaps
        title=title,
    )


def _loads(line: bytes) -> dict[str, Any]:
    # raw_decode on str skips json.loads' encoding detection and trailing-space regex: this runs
    # three times per session. Lines are written by jmp, so there is nothing after the object.
    record = _DECODER.raw_decode(line.decode())[0]
    if not isinstance(record, dict):
        raise ValueError("not a record")
    return record


def _deciding_kinds(lines: Iterator[bytes], fd: int, size: int) -> list[tuple[str, str | None]]:
    """Walk back until a final/user/run_started line; re-read a bigger tail if needed."""
    chunk = TAIL_BYTES
    while True:
        for line in lines:
            kind = _kind(line)
            if kind in _DECIDING:
                status = _loads(line)["data"].get("status") if kind == "final" else None
                return [(kind, status)]
        if chunk >= size:
            return []
        chunk *= 2
        tail = _read_tail(fd, size, chunk)
        lines = _complete_lines_backwards(tail, whole=len(tail) >= size)


def _kind(line: bytes) -> str:
    # The envelope comes before `data` in every line jmp writes; check the cheap prefix first.
    prefix = line[:200]
    for kind in _DECIDING:
        if b'"kind":"' + kind.encode() + b'"' in prefix:
            return str(_loads(line)["kind"])
    return "" if b'"kind":' in prefix else str(_loads(line)["kind"])


def _read_tail(fd: int, size: int, length: int) -> bytes:
    start = max(0, size - length)
    return os.pread(fd, size - start, start)


def _complete_lines_backwards(buf: bytes, whole: bool) -> Iterator[bytes]:
    """Complete lines, newest first; a torn last line and a cut first line are skipped."""
    end = buf.rfind(b"\n")
    while end > 0:
        start = buf.rfind(b"\n", 0, end) + 1
        if start == 0 and not whole:
            return
        yield buf[start:end]
        end = start - 1


def _title(head: bytes, fd: int) -> str:
    """The first user request without its embedded context blocks, on one line, truncated."""
    pos = head.find(b'"kind":"user"')
    if pos < 0:
        return ""
    start = head.rfind(b"\n", 0, pos) + 1
    stop = head.find(b"\n", pos)
    line = head[start:stop] if stop >= 0 else _read_line(fd, start)
    record = _loads(line)
    if record.get("kind") != "user":
        return ""
    return title_of(str(record["data"]["text"]))


def title_of(request: str) -> str:
    """A session's title from its first request: without embedded context blocks, on one line,
    truncated (`jmp --list`, ACP `session/list` and `session_info_update` say the same)."""
    text = " ".join(without_context(request).split())
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"


def _read_line(fd: int, start: int) -> bytes:
    """The line that begins at byte start (a request longer than the head read)."""
    parts = []
    while True:
        chunk = os.pread(fd, HEAD_BYTES, start)
        stop = chunk.find(b"\n")
        if stop >= 0 or not chunk:
            parts.append(chunk[:stop] if stop >= 0 else chunk)
            return b"".join(parts)
        parts.append(chunk)
        start += len(chunk)
