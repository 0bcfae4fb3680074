"""The disk process:
`python -m jmp_lab.chaos.powercut serve BACKING MOUNT --model M --control SOCK`.

Everything in BACKING at start is durable. The daemon mounts LossyFS at MOUNT (foreground,
threaded) and answers requests on the control socket (multiprocessing.connection, the authkey
in $POWERCUT_KEY, one thread per connection):

- `{"op": "status"}`: state (open, frozen, cut), what froze it, counts, the rules' hits.
- `{"op": "arm", "rules": [...]}`: replace the faults and triggers (fs.Rule fields).
- `{"op": "freeze"}` / `{"op": "thaw"}`: every operation waits / goes on.
- `{"op": "wait", "timeout": S}`: until a trigger froze the filesystem (its reason), or None.
- `{"op": "cut", "data": V, "dirs": V, "seed": N}`: the power cut. Operations waiting fail with
  EIO, the durable image is taken, MOUNT is unmounted, BACKING is rewritten to the image, and
  the answer (what was lost) comes when that is done; then the daemon exits.
- `{"op": "stop"}`: unmount and exit, BACKING as processes left it (no cut).

A cut whose mount does not end (a process still holds a file on it and fusectl cannot abort
the connection) is refused after 6 x $POWERCUT_UNMOUNT_WAIT_S (5 s by default) and BACKING
stays as processes left it, even when the mount ends later. Exit status: 0 when the FUSE loop
ended after this daemon detached the mount (a cut, a stop), 1 when something else ended it
first (a signal, an error of libfuse); the log says which.

`--trace FILE` also writes every operation the image is told of to FILE (trace.py), for the
crash-state explorer.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import threading
import traceback
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import IO, Any

import mfusepy

from jmp_lab.chaos.powercut.backing import materialize, scan
from jmp_lab.chaos.powercut.cut import CutReport, take
from jmp_lab.chaos.powercut.fs import LossyFS
from jmp_lab.chaos.powercut.gate import Rule
from jmp_lab.chaos.powercut.model import MODELS, Image
from jmp_lab.chaos.powercut.trace import TracedImage

UNMOUNT_WAIT_S = float(os.environ.get("POWERCUT_UNMOUNT_WAIT_S") or 5.0)
TEARDOWN = (
    "libfuse's loop ended with its error 8 after this daemon had detached the mount: the end "
    "of the mount it asked for, not a failure. The kernel tears the connection down once the "
    "detached mount's last file is closed, and a worker thread that had just taken a request "
    "(a RELEASE of that burst) reads ECONNABORTED from /dev/fuse, which libfuse counts as an "
    "error (its line 'fuse: reading device: Software caused connection abort' above; without "
    "that line a signal ended the loop in that moment)"
)


class Disk:
    """One mount's daemon state: the filesystem, and the cut being carried out."""

    def __init__(
        self, backing: Path, mount: Path, model: str, trace: IO[bytes] | None = None
    ) -> None:
        self.backing = backing
        self.mount = mount
        self.image = Image(model) if trace is None else TracedImage(model, trace, _caller)
        scan(backing, self.image)
        self.fs = LossyFS(str(backing), self.image)
        self.report: CutReport | None = None
        self.unmounted = threading.Event()  # the FUSE loop returned
        self.rewritten = threading.Event()  # BACKING holds the image (or was left as it is)
        self.answered = threading.Event()  # the cut's or stop's answer went out
        self.closing = False
        self.device = 0
        self.detached = False  # this daemon asked for the unmount (a cut, a stop)
        self.materialized = False  # BACKING holds the cut's image
        self._rewriting = threading.Lock()

    def handle(self, request: dict[str, Any]) -> Any:
        fs, op = self.fs, request.get("op")
        if op == "status":
            return self.status()
        if op == "arm":
            with fs.mutex:
                fs.rules = [Rule(**_rule(r)) for r in request.get("rules", [])]
                fs.gate.fired.clear()
            return True
        if op == "freeze":
            with fs.mutex:
                fs.gate.freeze({"op": "freeze"})
            return True
        if op == "thaw":
            with fs.mutex:
                if fs.gate.state == "frozen":
                    fs.gate.state = "open"
                    fs.gate.changed.notify_all()
            return True
        if op == "wait":
            fired = fs.gate.fired.wait(float(request.get("timeout", 0)))
            return dict(fs.gate.why) if fired else None
        if op in ("cut", "stop"):
            self.closing = True
        if op == "cut":
            return self.cut(str(request["data"]), str(request["dirs"]), int(request["seed"]))
        if op == "stop":
            with fs.mutex:
                if fs.gate.state == "frozen":
                    fs.gate.cut()  # whatever waits fails: nobody is left to cut the power
            self.unmount()
            self.rewritten.wait(UNMOUNT_WAIT_S * 2)
            return True
        raise ValueError(f"unknown request {op!r}")

    def status(self) -> dict[str, Any]:
        fs, image = self.fs, self.image
        with fs.mutex:
            return {
                "state": fs.gate.state,
                "blocked": list(fs.gate.blocked),
                "why": dict(fs.gate.why),
                "counts": dict(fs.counts),
                "rules": [
                    {"op": r.op, "action": r.action, "nth": r.nth, "seen": r.seen, "fired": r.fired}
                    for r in fs.rules
                ],
                "pending_ops": len(image.pending),
                "syncs": image.syncs,
                "failed_syncs": image.failed_syncs,
                "model": image.model,
            }

    def cut(self, data: str, dirs: str, seed: int) -> dict[str, Any]:
        fs = self.fs
        with fs.mutex:
            fs.gate.cut()  # waiting operations fail with EIO once we let go of the lock
            report = take(self.image, random.Random(seed), data, dirs, fs.live_bytes)
            self.report = report
        self.unmount()
        self.rewritten.wait(UNMOUNT_WAIT_S * 4)
        if self.unmounted.is_set():
            self.rewrite()  # the FUSE loop ended before the image was taken: done here
        with self._rewriting:
            if not self.materialized:  # refused for good: the loop's end rewrites nothing
                self.report = None
                raise RuntimeError(
                    f"the mount did not end within {UNMOUNT_WAIT_S * 6:g} s (a process still "
                    "holds a file on it?): BACKING is as processes left it, not the durable "
                    "image, and stays so"
                )
        return {
            "reverted": report.reverted,
            "torn": report.torn,
            "undone": report.undone,
            "kept": report.kept,
            "files": sum(1 for e in report.entries if e.kind == "file"),
        }

    def unmount(self) -> None:
        """Detach MOUNT; if the FUSE loop does not end (a process still holds a file), abort
        the connection as a dead disk would."""
        self.detached = True
        tool = shutil.which("fusermount3") or shutil.which("fusermount")
        command = [tool, "-u", "-z", str(self.mount)] if tool else ["umount", "-l", str(self.mount)]
        subprocess.run(command, capture_output=True, check=False)
        if not self.unmounted.wait(UNMOUNT_WAIT_S) and self.device:
            abort = Path(f"/sys/fs/fuse/connections/{os.minor(self.device)}/abort")
            with contextlib.suppress(OSError):
                abort.write_text("1")
            self.unmounted.wait(UNMOUNT_WAIT_S)

    def finish(self) -> None:
        """After the FUSE loop: rewrite BACKING to the image when there was a cut."""
        self.unmounted.set()
        try:
            with self.fs.mutex:
                # A descriptor released while frozen is in both: closed once (it may be reused).
                for fd in set(self.fs.deferred) | set(self.fs.nodes):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.fs.deferred, self.fs.nodes = [], {}
            self.rewrite()
        finally:
            self.rewritten.set()

    def rewrite(self) -> None:
        """BACKING becomes the cut's image, once, by whichever of the FUSE loop's end and the
        cut comes last (the loop may end first: a signal, an error of libfuse)."""
        with self._rewriting:
            if self.report is not None and not self.materialized:
                materialize(self.backing, self.report.entries)
                self.materialized = True


class _FUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy (3.1) drops what libfuse 3 hands these operations: rename's flags
    (RENAME_NOREPLACE, RENAME_EXCHANGE) and the open file of ftruncate, fchmod, fchown and
    futimens (with `nopath` their path is NULL: without the handle they have no file)."""

    def _text(self, path: bytes | None) -> str | None:
        return None if path is None else path.decode(self.encoding, self.errors)

    @staticmethod
    def _fh(fip: Any) -> int | None:
        return int(fip.contents.fh) if fip else None

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return int(self.operations.rename(self._text(old), self._text(new), flags) or 0)

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        return int(self.operations.truncate(self._text(path), length, self._fh(fip)) or 0)

    def chmod_fuse_3(self, path: bytes | None, mode: int, fip: Any) -> int:
        return int(self.operations.chmod(self._text(path), mode, self._fh(fip)) or 0)

    def chown_fuse_3(self, path: bytes | None, uid: int, gid: int, fip: Any) -> int:
        # -1 ("leave as it is") arrives as the unsigned maximum
        uid, gid = (-1 if v == 2**32 - 1 else v for v in (uid, gid))
        return int(self.operations.chown(self._text(path), uid, gid, self._fh(fip)) or 0)

    def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        times = None
        if buf:
            stamps = (buf.contents.actime, buf.contents.modtime)
            times = tuple(t.tv_sec * 10**9 + t.tv_nsec for t in stamps)
        return int(self.operations.utimens(self._text(path), times, self._fh(fip)) or 0)


def _caller() -> int:
    """The pid of the process whose request the FUSE thread is serving."""
    return int(mfusepy.fuse_get_context()[2])


def _rule(raw: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        k: raw[k] for k in ("op", "pattern", "nth", "action", "contains") if k in raw
    }
    if isinstance(fields.get("contains"), str):
        fields["contains"] = fields["contains"].encode()
    return fields


def _serve(listener: Listener, disk: Disk) -> None:
    while True:
        try:
            conn = listener.accept()
        except OSError:
            return
        threading.Thread(target=_answer, args=(conn, disk), daemon=True).start()


def _answer(conn: Connection, disk: Disk) -> None:
    with conn:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            try:
                reply: Any = {"ok": disk.handle(request)}
            except Exception as exc:  # a bad request is answered, never fatal
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                conn.send(reply)
            except OSError:
                return
            finally:
                if request.get("op") in ("cut", "stop"):
                    disk.answered.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jmp_lab.chaos.powercut serve")
    parser.add_argument("backing", type=Path)
    parser.add_argument("mount", type=Path)
    parser.add_argument("--model", choices=MODELS, default="strict")
    parser.add_argument("--control", required=True)
    parser.add_argument("--trace", type=Path, default=None, help="write the trace here")
    options = parser.parse_args(argv)
    key = bytes.fromhex(os.environ.get("POWERCUT_KEY", ""))
    trace = open(options.trace, "ab") if options.trace else None  # noqa: SIM115 (process-long)
    disk = Disk(options.backing.absolute(), options.mount.absolute(), options.model, trace)
    listener = Listener(options.control, family="AF_UNIX", authkey=key or None)
    threading.Thread(target=_serve, args=(listener, disk), daemon=True).start()

    def device() -> None:
        if disk.fs.mounted.wait(30):
            with contextlib.suppress(OSError):
                disk.device = os.stat(disk.mount).st_dev

    threading.Thread(target=device, daemon=True).start()
    options_ = {"allow_other": True} if os.geteuid() == 0 else {}
    status = 0
    try:
        _FUSE(
            disk.fs,
            str(disk.mount),
            foreground=True,
            hard_remove=True,
            fsname="powercut",
            default_permissions=True,
            **options_,
        )
    except Exception as exc:  # libfuse's loop ended with an error (RuntimeError: 8)
        if disk.detached and isinstance(exc, RuntimeError) and exc.args == (8,):
            print(TEARDOWN, file=sys.stderr, flush=True)
        else:  # a signal or an error ended it before any unmount of ours
            traceback.print_exc()
            print("the FUSE loop ended abnormally; the mount is gone", file=sys.stderr, flush=True)
            status = 1
    finally:
        disk.finish()
    if disk.closing:  # the cut's (or stop's) answer goes out before the process ends
        disk.answered.wait(UNMOUNT_WAIT_S * 8)
    listener.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
