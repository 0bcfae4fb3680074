"""Artifacts: complete redacted requests, results and outputs, confined to the session."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from kernel.errors import ArtifactRefused
from kernel.event_log import write_all
from kernel.redact import Redactor

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_json = msgspec.json.Encoder()


class Artifacts:
    """Files under SESSION/artifacts/: written atomically and redacted, read only from inside."""

    def __init__(self, session_dir: Path, redactor: Redactor) -> None:
        self.root = Path(session_dir)
        self.directory = self.root / "artifacts"
        self.redactor = redactor

    def write_json(self, name: str, obj: Any) -> str:
        """Store obj (structs, dicts, lists) as indented JSON; returns the path relative to root."""
        clean = self.redactor.value(msgspec.to_builtins(obj))
        return self._write(name, msgspec.json.format(_json.encode(clean), indent=2) + b"\n")

    def write_text(self, name: str, text: str) -> str:
        """Store text; returns the path relative to the session directory."""
        return self._write(name, self.redactor.text(text).encode("utf-8", "surrogateescape"))

    def _write(self, name: str, data: bytes) -> str:
        target = self.directory / _free_name(self.directory, name)
        # Temp file + fsync + rename: a reader (or a crash) sees the whole file or none of it.
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            write_all(fd, data)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, target)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            Path(tmp).unlink(missing_ok=True)
            raise
        return target.relative_to(self.root).as_posix()

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
        """The text of an artifact inside the session directory."""
        return self.path(rel).read_text("utf-8", "replace")

    def read_json(self, rel: str) -> Any:
        """The decoded JSON of an artifact inside the session directory."""
        return msgspec.json.decode(self.path(rel).read_bytes())


def _free_name(directory: Path, name: str) -> str:
    """name, or name with a counter: an artifact that an event points at is never replaced."""
    if not _NAME.fullmatch(name):
        raise ArtifactRefused(f"artifact name {name!r} must be one plain file name")
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    candidate, n = name, 1
    while (directory / candidate).exists():
        n += 1
        candidate = f"{stem}-{n}{dot}{ext}"
    return candidate
