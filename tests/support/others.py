"""Another local user, and the modes a session's files must have for that user to get nothing
(issue 32, item 2). Root ignores file modes: `nobody` (setpriv, every group dropped) is the
other user. Shared by tests/kernel/test_modes.py and the matrix row tests/security/test_modes.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

NOBODY = 65534
needs_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("flock"),
    reason="needs root with setpriv and flock(1), to act as another user (nobody)",
)
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


def as_nobody(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """argv run as nobody (util-linux tools only: the venv under /root is not theirs)."""
    return subprocess.run([*SETPRIV, *argv], capture_output=True, timeout=60, check=False)


def nobody_reads(path: Path) -> bytes | None:
    """What nobody reads of `path` (None: refused)."""
    done = as_nobody("cat", "--", str(path))
    return done.stdout if done.returncode == 0 else None


def nobody_locks(path: Path) -> bool:
    """Can nobody flock `path` (flock(1) opens it read-only, which is all flock needs)?"""
    return as_nobody("flock", "--nonblock", "--exclusive", str(path), "true").returncode == 0


def reachable(path: Path) -> None:
    """Let nobody walk down to `path` (the test's own temp dirs are 0700): every parent up to
    /tmp gets o+x, so that only jmp's own modes decide what nobody can reach."""
    for parent in [path, *path.parents]:
        if parent == Path("/tmp") or parent == Path("/"):
            break
        parent.chmod(stat.S_IMODE(parent.stat().st_mode) | 0o001)


def loose_modes(root: Path) -> list[str]:
    """Every entry under root (root too) that is not the owner's alone: a directory other than
    0700, a file jmp wrote other than 0600 (an executable the tool worker made may be 0700),
    as `name 0644`."""
    found = []
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            continue
        want = (0o700,) if stat.S_ISDIR(info.st_mode) else (0o600, 0o700)
        if mode not in want:
            found.append(f"{path.relative_to(root.parent)} {mode:04o}")
    return found
