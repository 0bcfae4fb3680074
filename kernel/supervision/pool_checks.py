"""What the kernel checks before it talks to a warm pool: the runtime dir, and the listener.

A pool dir must be a real directory of ours with mode 0700. The process listening on the pool
socket must be a jmp pool of ours for this directory and confinement view, as far as the
kernel can tell; anything else gets nothing and the kernel spawns cold. A process of our own
user that sets out to pass these checks can (docs/JMP.md, "Secrets and the shell").
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
from pathlib import Path

from host import confinement as C
from host import landlock as L
from host import pool as H


def check_dir(path: Path) -> str:
    """'' when `path` is a real directory of ours with mode 0700 (created if missing)."""
    with contextlib.suppress(FileExistsError, OSError):
        path.mkdir(mode=0o700, parents=True)
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"runtime dir {path}: {exc.strerror}"
    if os.path.islink(path) or not os.path.isdir(path):
        return f"runtime dir {path} is not a directory"
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return f"runtime dir {path} is not private (want owner uid {os.getuid()}, mode 0700)"
    return ""


def listener_problem(sock: socket.socket) -> tuple[str, int | None]:
    """Why the process listening on the pool socket is not a pool of ours for this directory
    and view ('' when it is): checked before a byte is sent. It must be of our uid
    (SO_PEERCRED), carry the pool's title for this dir and view, run our interpreter (when its
    /proc entry lets us see: root, or a dumpable process), for a user other than root be
    non-dumpable as a jmp pool is, and name in its title a Landlock probe of its own that we
    can inspect (so its domain is ours or nested in ours: `host/landlock.py`). Returns
    (problem, None) or ('', an fd of that probe's working directory: the caller's proof, to
    send along and close). A process of our own user that sets out to pass these can
    (docs/JMP.md, "Secrets and the shell"); anything else cannot."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        return f"the pool socket belongs to uid {uid}, not {os.getuid()}", None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            title = f.read(8192).split(b"\0")[:4]
        status = os.stat(f"/proc/{pid}/status")
    except OSError:
        return f"the pool socket's process ({pid}) is not visible", None
    expected = [H.TITLE, str(H.pool_dir(os.environ, os.getuid())), C.own_view_key()]
    parts = [part.decode("utf-8", "replace") for part in title]
    if parts[:3] != expected:
        return f"the pool socket is served by process {pid}, which is not a jmp pool", None
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:  # non-dumpable, and we are not root: its title must do
        exe = None
    ours = os.path.realpath(sys.executable)
    if exe is not None and exe != ours and not exe.endswith(" (deleted)"):
        return f"the pool socket is served by process {pid}, which does not run {ours}", None
    if os.getuid() != 0 and status.st_uid == os.getuid():
        return (
            f"the pool socket is served by process {pid}, which is dumpable: not a jmp pool",
            None,
        )
    probe = L.probe_of_title(parts)
    if probe is None:
        return f"the pool (process {pid}) names no Landlock probe: its domain cannot be told", None
    domain, proof = L.open_cwd(probe, pid)
    if domain:
        return f"the pool (process {pid}) is not in this process's Landlock domain: {domain}", None
    return "", proof
