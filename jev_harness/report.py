"""The JSON report of an evidence task: its document, its atomic write and its receipt.

The report is `{"version": 1, "goal", "records": [{"label", "quote", "source", "ref", ...}],
"sources": [...]}`, written by temp file, fsync and rename into the output's own directory
only: a kill leaves either the old file or the new one, never a torn one. This is the harness
worker's one atomic write; the kernel's twin is kernel/store/durable.py (neither may import
the other's side).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPORT_VERSION = 1
_temp_names = itertools.count(1)


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


def write_report(path: Path, doc: dict[str, Any]) -> None:
    """Write `doc` at `path` atomically; only `path` and a temp file beside it are touched."""
    if path.is_dir() and not path.is_symlink():
        raise IsADirectoryError(f"the report output {str(path)!r} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{next(_temp_names)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(encode_report(doc))
            handle.flush()
            os.fsync(handle.fileno())  # the bytes are down before the name points at them
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # the rename itself survives a crash


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def receipt(path: Path, expected: dict[str, Any]) -> dict[str, Any]:
    """What is on disk at `path` now, and whether it equals the `expected` report."""
    result: dict[str, Any] = {
        "path": str(path),
        "exists": False,
        "match": False,
        "record_count": 0,
        "digest": None,
        "sources": [],
    }
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return result
    result["exists"] = True
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
