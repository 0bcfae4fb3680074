"""Runtime directories for ipc:// sockets: /tmp/jmp-<pid>-<start>-<random>, 0700.

The name records the kernel that owns the directory: its pid and its start time (clock ticks
since boot, from /proc, so a reused pid is told apart). A kernel that was killed (kill -9)
cannot remove its own; the next kernel of the same user does, once per process, before it
makes its first one (issue 9, item 19). A directory whose owner is alive, that belongs to
another user, or that is not a plain directory is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

RUNTIME_ROOT = "/tmp"  # short: Unix socket paths are capped near 107 bytes
_NAME = re.compile(r"jmp-(\d+)-(\d+)-[A-Za-z0-9_]+")
_cleaned = False


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it is gone/unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # Field 22 (starttime); split after the command name, which may hold spaces and parens.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def make_runtime_dir() -> Path:
    """A fresh private (0700) directory with a short path, named after this kernel."""
    clean_stale_runtime_dirs()
    pid = os.getpid()
    prefix = f"jmp-{pid}-{start_ticks(pid) or 0}-"
    for _ in range(100):  # tempfile.mkdtemp's way, without its import (shutil, random)
        path = Path(RUNTIME_ROOT, prefix + os.urandom(8).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free runtime directory name under {RUNTIME_ROOT}")


def clean_stale_runtime_dirs(force: bool = False) -> list[str]:
    """Remove this user's runtime dirs whose kernel is dead; once per process unless forced.

    Returns the names removed. Never raises: cleanup must not stop a run.
    """
    global _cleaned
    if _cleaned and not force:
        return []
    _cleaned = True
    removed = []
    try:
        entries = list(os.scandir(RUNTIME_ROOT))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith("jmp-"):  # /tmp may hold thousands of others: be quick
            continue
        match = _NAME.fullmatch(entry.name)
        if match is None or not _mine(entry):
            continue
        if _owner_alive(int(match.group(1)), int(match.group(2))):
            continue
        import shutil

        with contextlib.suppress(OSError):
            shutil.rmtree(entry.path)  # fd-based on Linux: never follows a link inside
            removed.append(entry.name)
    return removed


def _mine(entry: os.DirEntry[str]) -> bool:
    """A real directory (not a link) owned by this user."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _owner_alive(pid: int, ticks: int) -> bool:
    """Whether the kernel that made the directory still runs; unsure counts as alive."""
    actual = start_ticks(pid)
    if actual is not None:
        return ticks == 0 or actual == ticks
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
