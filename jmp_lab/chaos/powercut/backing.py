"""The backing directory at the edges of a mount: read whole into an Image when it mounts (all
of it durable), rewritten to a cut's tree when the power comes back."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from jmp_lab.chaos.powercut.cut import Entry
from jmp_lab.chaos.powercut.fsbase import KINDS
from jmp_lab.chaos.powercut.model import Image


def scan(backing: Path, image: Image) -> None:
    """Seed the image with BACKING as it is (all durable)."""
    for top, dirs, files in os.walk(backing, followlinks=False):
        rel = "/" + os.path.relpath(top, backing) if top != str(backing) else ""
        for name in sorted(dirs + files):
            path = os.path.join(top, name)
            st = os.lstat(path)
            kind = KINDS.get(stat.S_IFMT(st.st_mode), "special")
            if kind == "dir" and os.path.islink(path):
                kind = "symlink"
            data = Path(path).read_bytes() if kind == "file" else b""
            target = os.readlink(path) if kind == "symlink" else ""
            image.seed(f"{rel}/{name}", kind, stat.S_IMODE(st.st_mode), data, target)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]


def materialize(backing: Path, entries: list[Entry]) -> None:
    """Make BACKING hold exactly `entries` (built beside it, then swapped in)."""
    fresh = backing.with_name(backing.name + ".cut")
    old = backing.with_name(backing.name + ".old")
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    fresh.mkdir(mode=stat.S_IMODE(backing.stat().st_mode))
    first: dict[int, str] = {}
    modes: list[tuple[str, int]] = []
    for entry in entries:
        path = str(fresh) + entry.path
        if entry.kind == "dir":
            os.mkdir(path, 0o700)
            modes.append((path, entry.mode))
        elif entry.kind == "file" and entry.node in first:
            os.link(first[entry.node], path)
        elif entry.kind == "file":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(entry.data)
            os.chmod(path, entry.mode)
            first[entry.node] = path
        elif entry.kind == "symlink":
            os.symlink(entry.data.decode(errors="surrogateescape"), path)
        elif entry.kind == "fifo":
            os.mkfifo(path, entry.mode)
        # a socket or device node does not outlive a reboot as anything usable: left out
    for path, mode in reversed(modes):
        os.chmod(path, mode)
    backing.rename(old)
    fresh.rename(backing)
    shutil.rmtree(old, ignore_errors=True)
