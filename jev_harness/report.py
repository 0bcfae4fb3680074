"""The JSON report of an evidence task: its document, its atomic write and its receipt.

The report is `{"version": 1, "goal", "records": [{"label", "quote", "source", "ref", ...}],
"sources": [...]}`, written by temp file, fsync and rename into the output's own directory
only: a kill leaves either the old file or the new one, never a torn one. This is the harness
worker's one atomic write; the kernel's twin is kernel/store/durable.py (neither may import
the other's side). Planted names are refused, never followed: a link among the output's
directories (below the working directory), an existing file that is not a report (a session's
events.jsonl, say), a FIFO or a device where the receipt reads.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import json
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPORT_VERSION = 1
MAX_REPORT_BYTES = 16 * 1024 * 1024  # far above any report of records; a larger file is not one
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_temp_names = itertools.count(1)


class ReportFile:
    """The report at `path`: the records and document last written there, and a write handed
    over to a driver that redacts it first (`pending`: the unredacted document, its records)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[dict[str, Any]] | None = None
        self.document: dict[str, Any] | None = None  # as a re-read of the file gives it
        self.pending: tuple[dict[str, Any], list[dict[str, Any]]] | None = None

    def write(self, document: dict[str, Any], records: list[dict[str, Any]]) -> None:
        write_report(self.path, document)
        self.records, self.document = records, json.loads(encode_report(document))

    def take_pending(self) -> list[dict[str, Any]]:
        """The records of the write handed over (it is no longer pending); ValueError if none."""
        if self.pending is None:
            raise ValueError("no report was handed over (save_report first)")
        records, self.pending = self.pending[1], None
        return records

    def receipt(
        self, records: list[dict[str, Any]], current: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """The receipt; `match` compares with the document as written while `records` are
        those written, else with `current()` (the report the records make now)."""
        written = self.document
        if written is not None and records == self.records:
            return receipt(self.path, written)
        return receipt(self.path, current())


def report_document(
    goal: str, records: Sequence[dict[str, Any]], redact: Callable[[Any], Any]
) -> dict[str, Any]:
    """The report for these records, with known secrets redacted."""
    sources: list[str] = []
    for record in records:
        if record["source"] not in sources:
            sources.append(record["source"])
    doc = {"version": REPORT_VERSION, "goal": goal, "records": list(records), "sources": sources}
    # Through JSON once, so that it compares equal to what a re-read of the file gives.
    normal: dict[str, Any] = json.loads(encode_report(redact(doc)))
    return normal


def encode_report(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


class ReportRefused(OSError):
    """The output location is not one a report may be written to (or read from)."""


def write_report(path: Path, doc: dict[str, Any]) -> None:
    """Write `doc` at `path` atomically; only `path` and a temp file beside it are touched.

    The directories are reached without following a link (see `open_directory`), missing ones are
    created, and an existing `path` is replaced only when it is a regular file holding a
    jev-harness report: anything else there (another file, a link, a FIFO, a directory) is
    refused with ReportRefused, never overwritten.
    """
    data = encode_report(doc)
    if len(data) > MAX_REPORT_BYTES:
        raise ReportRefused(f"the report is larger than {MAX_REPORT_BYTES} bytes; not written")
    dirfd = open_directory(path.parent, create=True)
    try:
        _check_replaceable(dirfd, path)
        temp = f".{path.name}.{os.getpid()}.{next(_temp_names)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(temp, flags, 0o644, dir_fd=dirfd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())  # the bytes are down before the name points at them
            os.replace(temp, path.name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dirfd)
            raise
        os.fsync(dirfd)  # the rename itself survives a crash
    finally:
        os.close(dirfd)


def open_directory(directory: Path, create: bool) -> int:
    """A descriptor of `directory`, reached one component at a time with O_NOFOLLOW (the
    report's directory, and the MCP server's `--archive` one).

    The walk starts at the working directory when `directory` lies inside it (the person
    chose that directory, links on its way included), else at `/`; a symbolic link or a
    non-directory among the remaining components is ReportRefused. With `create`, missing
    components are made (mode 0777 less the umask).
    """
    cwd = Path(os.getcwd())
    inside = directory.parts[: len(cwd.parts)] == cwd.parts
    start, rest = (
        (cwd, directory.parts[len(cwd.parts) :]) if inside else (Path("/"), directory.parts[1:])
    )
    fd = os.open(start, _DIR_FLAGS)
    reached = start
    try:
        for name in rest:
            if name in ("", "."):
                continue
            reached = reached / name
            try:
                inner = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                inner = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ReportRefused(
                        f"{reached} is a symbolic link or not a directory: a report is never "
                        "written or read through a link"
                    ) from None
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_replaceable(dirfd: int, path: Path) -> None:
    """Refuse to replace anything at `path` but a jev-harness report (nothing there is fine)."""
    try:
        info = os.stat(path.name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_REPORT_BYTES:
        data = _read(dirfd, path.name)
        if data is not None and _is_report(data):
            return
    raise ReportRefused(
        f"{path} exists and is not a jev-harness report ({_kind(info.st_mode)}); it is not "
        "replaced: remove it or choose another output"
    )


def _read(dirfd: int, name: str) -> bytes | None:
    """The bytes of a regular file of at most MAX_REPORT_BYTES; None for anything else.

    Never follows a link, never blocks (a FIFO is opened non-blocking and refused)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPORT_BYTES:
            return None
        chunks, size = [], 0
        while size <= MAX_REPORT_BYTES and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
        return None if size > MAX_REPORT_BYTES else b"".join(chunks)
    finally:
        os.close(fd)


def _is_report(data: bytes) -> bool:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return (
        isinstance(doc, dict)
        and doc.get("version") == REPORT_VERSION
        and isinstance(doc.get("records"), list)
        and isinstance(doc.get("sources"), list)
    )


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return "a file with other content"


def receipt(path: Path, expected: dict[str, Any]) -> dict[str, Any]:
    """What is on disk at `path` now, and whether it equals the `expected` report.

    Read like the write: no link followed, nothing but a regular file of at most
    MAX_REPORT_BYTES read (something else there `exists` with digest None), never blocking.
    """
    result: dict[str, Any] = {
        "path": str(path),
        "exists": False,
        "match": False,
        "record_count": 0,
        "digest": None,
        "sources": [],
    }
    try:
        dirfd = open_directory(path.parent, create=False)
    except OSError:
        return result
    try:
        try:
            os.stat(path.name, dir_fd=dirfd, follow_symlinks=False)
        except OSError:
            return result
        result["exists"] = True
        data = _read(dirfd, path.name)
    finally:
        os.close(dirfd)
    if data is None:
        return result
    result["digest"] = hashlib.sha256(data).hexdigest()
    try:
        saved = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return result
    if isinstance(saved, dict):
        records = saved.get("records")
        result["record_count"] = len(records) if isinstance(records, list) else 0
        sources = saved.get("sources")
        result["sources"] = (
            [s for s in sources if isinstance(s, str)] if isinstance(sources, list) else []
        )
    result["match"] = saved == expected
    return result
