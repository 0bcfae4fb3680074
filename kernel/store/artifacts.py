"""Artifacts: complete redacted requests, results and outputs, confined to the session.

Each is written to a temp file and renamed (a reader, or a kill, sees it whole or not at all),
then made durable, data and name: by the session's group commit (kernel/store/commit.py)
before any record appended after it is written, so no record on the disk names an artifact
that a power cut could take back or leave short; standalone, at once.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kernel.errors import ArtifactRefused
from kernel.store.durable import fsync_dir, write_at, write_renamed
from kernel.store.guard import open_nofollow, read_nofollow, storage_error
from kernel.store.modes import make_dir
from kernel.store.redact import Redactor
from protocol.text import clean, cleaned

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_json = msgspec.json.Encoder()
CACHE_CHARS = 8_000_000  # texts kept in memory per session, least recently used dropped first
CACHE_ENTRY_CHARS = 1_000_000  # a larger text is read from disk every time
# Takes over a written artifact's descriptor: (fd, directory fd, path); fsyncs both, closes fd.
Hold = Callable[[int, int, Path], None]


class Artifacts:
    """Files under SESSION/artifacts/: written atomically and redacted, read only from inside."""

    def __init__(self, session_dir: Path, redactor: Redactor, hold: Hold | None = None) -> None:
        self.root = Path(session_dir)
        self.directory = self.root / "artifacts"
        self.redactor = redactor
        self._hold = hold
        self._texts = TextCache(CACHE_CHARS, CACHE_ENTRY_CHARS)
        # Held open from the start: writes go to this directory even if a link replaces it.
        self._dir_fd: int | None = None
        if os.path.lexists(self.directory):
            self._dir_fd = self._open_dir()

    def _open_dir(self) -> int:
        try:
            return open_nofollow(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise storage_error("open the artifacts directory", self.directory, exc) from None

    def _dir(self) -> int:
        if self._dir_fd is None:
            try:
                make_dir(self.directory)
                fsync_dir(self.root)  # its name, before any record names a file in it
            except FileExistsError:
                pass
            self._dir_fd = self._open_dir()
        return self._dir_fd

    def close(self) -> None:
        """Release the directory handle; idempotent (a later write opens it again)."""
        fd, self._dir_fd = self._dir_fd, None
        if fd is not None:
            os.close(fd)

    def write_json(self, name: str, obj: Any) -> str:
        """Store obj as indented JSON; returns the relative path (see the module docstring)."""
        redacted = self.redactor.value(msgspec.to_builtins(obj))
        try:
            encoded = _json.encode(redacted)
        except UnicodeEncodeError:  # a lone surrogate: escaped, never a failed run
            encoded = _json.encode(cleaned(redacted))
        data = msgspec.json.format(encoded, indent=2) + b"\n"
        return self._write(name, data)

    def write_text(self, name: str, text: str) -> str:
        """Store text; returns the relative path (see the module docstring)."""
        data = clean(self.redactor.text(text)).encode("utf-8")
        rel = self._write(name, data)
        if len(data) <= CACHE_ENTRY_CHARS:
            self._texts.put(rel, as_read(data))
        return rel

    def _write(self, name: str, data: bytes) -> str:
        path = self.directory / name
        try:
            dfd = self._dir()
            target = _free_name(dfd, name)
            path = self.directory / target
            if self._hold is None:  # standalone: durable at once
                write_at(dfd, target, data)
                os.fsync(dfd)
            else:  # the commit fsyncs it, and the directory, before the next record
                self._hold(write_renamed(dfd, target, data), dfd, path)
        except OSError as exc:
            raise storage_error("write the artifact", path, exc) from None
        return f"artifacts/{target}"

    def path(self, rel: str) -> Path:
        """The resolved path of rel inside the session directory, or ArtifactRefused."""
        candidate = Path(rel)
        if not rel or candidate.is_absolute() or ".." in candidate.parts:
            raise ArtifactRefused(f"artifact path {rel!r} is not inside the session directory")
        root = self.root.resolve()
        resolved = (root / candidate).resolve()
        if not resolved.is_relative_to(root):
            raise ArtifactRefused(f"artifact path {rel!r} resolves outside the session directory")
        return resolved

    def read_text(self, rel: str) -> str:
        """The text of an artifact inside the session directory (artifacts are cached)."""
        cached = self._texts.get(rel)
        if cached is not None:
            return cached
        path = self.path(rel)
        text = as_read(self._read(path))
        # Only plain files under artifacts/: jmp never replaces those (a fresh name per write);
        # other files (the log) and links are read afresh every time.
        if rel == f"artifacts/{path.name}" and path.parent.name == "artifacts":
            self._texts.put(rel, text)
        return text

    def read_json(self, rel: str) -> Any:
        """The decoded JSON of an artifact inside the session directory."""
        return msgspec.json.decode(self._read(self.path(rel)))

    def _read(self, path: Path) -> bytes:
        try:
            return read_nofollow(path)
        except OSError as exc:
            raise storage_error("read the artifact", path, exc) from None


def _free_name(dfd: int, name: str) -> str:
    """name, or name with a counter: an artifact that an event points at is never replaced."""
    if not _NAME.fullmatch(name):
        raise ArtifactRefused(f"artifact name {name!r} must be one plain file name")
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    candidate, n = name, 1
    while _taken(dfd, candidate):
        n += 1
        candidate = f"{stem}-{n}{dot}{ext}"
    return candidate


def _taken(dfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def as_read(data: bytes) -> str:
    """The text `read_text` gives for these bytes (replacement chars, universal newlines)."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


class TextCache:
    """Texts by relative path, least recently used dropped first once past `limit` chars."""

    def __init__(self, limit: int, entry_limit: int) -> None:
        self.limit = limit
        self.entry_limit = entry_limit
        self.size = 0
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()  # the agent thread and an embedding caller may both read

    def get(self, rel: str) -> str | None:
        with self._lock:
            text = self._texts.get(rel)
            if text is not None:
                self._texts.move_to_end(rel)
            return text

    def put(self, rel: str, text: str) -> None:
        with self._lock:
            if len(text) > self.entry_limit or rel in self._texts:
                return
            self._texts[rel] = text
            self.size += len(text)
            while self.size > self.limit:
                _, dropped = self._texts.popitem(last=False)
                self.size -= len(dropped)
