"""Errors the kernel raises on purpose. Each JmpError maps to exit status 2 and a clear message.
(How a run ends is no error: `RunEnded`, kernel/run/ledger.py.)"""

from __future__ import annotations


class JmpError(Exception):
    """Base of every error jmp reports to the user by name (exit 2, nothing lost)."""

    exit_code = 2


class UsageError(JmpError):
    """The command line or the call is wrong."""


class ConfigError(JmpError):
    """A setting or configuration file is missing or wrong; names the variable or file."""


class SessionNotFound(JmpError):
    """No session with that id under the sessions directory."""


class SessionLocked(JmpError):
    """Another live process holds the session's single-writer lock."""


class WorkspaceMismatch(JmpError):
    """A later --workspace differs from the one the session is bound to."""


class CorruptLog(JmpError):
    """A complete or interior line of events.jsonl is malformed; nothing was written."""


class ArtifactRefused(JmpError):
    """An artifact path resolves outside the session directory."""


class ContextOverflow(JmpError):
    """Pinned intent cannot fit the budget; the run pauses, nothing is trimmed."""


class UnsupportedLogVersion(CorruptLog):
    """events.jsonl holds a record version this build does not read; nothing was written."""


class StorageError(JmpError):
    """The environment refused a file operation (read-only, full, unreadable, gone); names
    the operation and the path."""


class SessionRefused(JmpError):
    """A session directory holds a symbolic link or a special file where jmp keeps its own
    files; refused before anything is written."""


class LogReplaced(StorageError):
    """events.jsonl was replaced or removed under a running session; the run stops."""
