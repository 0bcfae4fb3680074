"""Broken builds of jmp, made at test time: the negative controls the explorer must catch.

Each is a `sitecustomize` module written to a temporary directory that goes first on the
PYTHONPATH of the jmp process under test (the kernel runs in it): Python imports it at start,
and it patches one of the kernel's durability steps before anything imports the module that
uses it. Nothing of this is in jmp's own code: a jmp run without that PYTHONPATH is the
product as shipped.

- `log-fsync-noop`: the event log's fsync does nothing (kernel/store/event_log.py);
- `no-dir-fsync`: no directory fsync after creating a file (kernel/store/durable.py
  `fsync_dir`, which a new session's directory and the artifacts' directories rely on, and
  the directories the group commit syncs with its artifacts);
- `artifact-after-record`: artifacts are made durable after the log fsync that covers the
  record naming them, not before (kernel/store/commit.py).
"""

from __future__ import annotations

from pathlib import Path

BROKEN = {
    "log-fsync-noop": """
import os as _os
import types as _types

import kernel.store.event_log as _log

_proxy = _types.SimpleNamespace(**{k: getattr(_os, k) for k in dir(_os) if not k.startswith("__")})
_proxy.fsync = lambda fd: None  # the broken build: the log is never made durable
_log.os = _proxy
""",
    "no-dir-fsync": """
import os as _os

import kernel.store.commit as _commit
import kernel.store.durable as _durable

_durable.fsync_dir = lambda path: None  # the broken build: a new entry is never made durable
_fsync = _commit._fsync


def _files_only(fd, path):
    if _os.path.isdir(path):
        return None
    return _fsync(fd, path)


_commit._fsync = _files_only
""",
    "artifact-after-record": """
import kernel.store.commit as _commit
import kernel.store.event_log as _log

_held = []
_fsync_all = _commit._fsync_all
_commit._fsync_all = _held.extend  # the broken build: the artifacts wait ...
_sync = _log.EventLog.sync


def _sync_then_artifacts(self):
    _sync(self)  # ... until the log's fsync made the record naming them durable
    pending = list(_held)
    _held.clear()
    _fsync_all(pending)


_log.EventLog.sync = _sync_then_artifacts
""",
}


# Only the jmp process itself (the kernel runs in it) is broken: its workers and the warm
# pool inherit PYTHONPATH and import this too, and are left as they are.
GUARD = """import os as _os
import sys as _sys

if _os.path.basename(_sys.argv[0] if _sys.argv else "") in ("main.py", "jmp"):
    from _jmp_broken import *  # noqa: F403
"""


def hook(name: str, directory: Path) -> dict[str, str]:
    """Write broken build `name`'s sitecustomize into `directory`; the environment that makes
    a jmp process import it (PYTHONPATH, the checkout first so the kernel imports)."""
    if name not in BROKEN:
        raise ValueError(f"unknown broken build {name!r}: one of {', '.join(BROKEN)}")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(GUARD)
    (directory / "_jmp_broken.py").write_text(BROKEN[name].lstrip())
    checkout = Path(__file__).resolve().parents[3]
    return {"PYTHONPATH": f"{directory}:{checkout}"}
