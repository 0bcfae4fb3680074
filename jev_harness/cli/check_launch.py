"""`jev-harness check-task`'s side of the probe: start it, bound what it says, verify the verdict.

The probe (`jev_harness.check`) gets a fresh key on one pipe and writes its verdict, signed
with that key, on another; stdout and stderr are one pipe whose bytes (at most MAX_SAID of
them) are shown redacted and inert. A verdict that is missing, unsigned, badly signed or
larger than MAX_VERDICT is no verdict: the check fails and says so. A run the OS could not
confine (see jev_harness/sandbox.py) is said on stderr, with why.
"""

from __future__ import annotations

import contextlib
import hmac
import itertools
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from host.spawn import SAFE_FLAGS, SPAWN_CWD, child_pythonpath
from jev_harness.check import PROBE_TIMEOUT_S

MAX_SAID = 64 * 1024  # of the script's own output, shown on stderr
MAX_VERDICT = 4 * 1024 * 1024
GRACE_S = 5.0  # past the probe's own deadline, before we kill its process group
UNCONFINED = (
    "jev-harness: check-task: the script ran without OS confinement ({why}): its import-time "
    "code (and build) ran with your rights; do not check a script you do not trust here\n"
)


def check_task(path: str, inputs: Any) -> dict[str, Any]:
    """Run the probe in a throwaway subprocess; its verdict, or a problem naming why not."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_ACCESS_KEY"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = child_pythonpath(env)
    try:
        workdir = os.getcwd()
    except OSError:
        return _failed("the working directory is gone")
    key = os.urandom(32)
    key_r, key_w = os.pipe()
    verdict_r, verdict_w = os.pipe()
    # Started in SPAWN_CWD with -P (nothing of the launch dir importable); it enters `workdir`
    # once sys.path is settled, so the script's relative paths mean what they mean here.
    module = [sys.executable, "-B", *SAFE_FLAGS, "-m", "jev_harness.check"]
    argv = [*module, os.path.abspath(path), workdir, str(key_r), str(verdict_w)]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=SPAWN_CWD,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(key_r, verdict_w),
            start_new_session=True,
        )
    finally:
        os.close(key_r)
        os.close(verdict_w)
    os.write(key_w, key)
    os.close(key_w)
    _feed(proc, json.dumps(inputs).encode())
    assert proc.stdout is not None
    said, verdict, timed_out = _collect(proc.stdout.fileno(), verdict_r, proc)
    proc.stdout.close()
    os.close(verdict_r)
    _show(said)
    if timed_out:
        return _failed(f"the script did not finish loading within {PROBE_TIMEOUT_S:g} s")
    payload = _authentic(verdict, key)
    if payload is None:
        return _failed(
            f"the check process ended with status {proc.returncode} and no authentic verdict"
        )
    if not payload.get("confined"):
        sys.stderr.write(UNCONFINED.format(why=payload.get("why") or "unknown"))
    result = payload.get("verdict")
    return result if isinstance(result, dict) else _failed("the check gave no verdict")


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """The inputs on the probe's stdin, from a thread (they may exceed a pipe's buffer)."""

    def write() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write(data)
        with contextlib.suppress(OSError):
            proc.stdin.close()

    threading.Thread(target=write, daemon=True, name="check-inputs").start()


def _collect(
    out_fd: int, verdict_fd: int, proc: subprocess.Popen[bytes]
) -> tuple[bytes, bytes, bool]:
    """Read both pipes to their end (every process holding them gone), keeping at most
    MAX_SAID and MAX_VERDICT bytes; past the deadline kill the probe's process group."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S + GRACE_S
    bufs = {out_fd: bytearray(), verdict_fd: bytearray()}
    caps = {out_fd: MAX_SAID, verdict_fd: MAX_VERDICT + 1}
    dropped = 0
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                room = caps[key.fd] - len(bufs[key.fd])
                bufs[key.fd] += chunk[:room]
                dropped += len(chunk) - min(room, len(chunk)) if key.fd == out_fd else 0
    proc.wait()
    said = bytes(bufs[out_fd])
    if dropped:
        said += f"\n[check-task: {dropped} more bytes of the script's output not shown]\n".encode()
    return said, bytes(bufs[verdict_fd]), timed_out


def _show(said: bytes) -> None:
    """What the script printed, on our stderr: redacted and inert, like all that leaves jmp."""
    if not said:
        return
    from kernel.display import terminal_safe
    from kernel.store.redact import Redactor, environment_secrets

    text = Redactor(environment_secrets()).text(said.decode("utf-8", "replace"))
    sys.stderr.write(terminal_safe(text))


def _authentic(verdict: bytes, key: bytes) -> dict[str, Any] | None:
    """The probe's payload when one line of `verdict` carries its key's signature, else None
    (the script may have written lines of its own first)."""
    if len(verdict) > MAX_VERDICT:
        return None
    lines = verdict.split(b"\n")
    for payload, signature in itertools.pairwise(lines):
        expected = hmac.new(key, payload, "sha256").hexdigest().encode()
        if hmac.compare_digest(expected, signature):
            with contextlib.suppress(ValueError):
                found = json.loads(payload)
                return found if isinstance(found, dict) else None
    return None


def _failed(problem: str) -> dict[str, Any]:
    return {"ok": False, "problems": [problem], "tools": [], "labels": []}
