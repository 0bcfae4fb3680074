"""The runner's side of the simulator: start a disk, arm it, freeze it, cut its power.

    disk = LossyDisk(backing, mount, model="journal", state=directory)
    disk.start()                      # the daemon mounts BACKING at MOUNT
    disk.arm([{"op": "fsync", "pattern": r"events\\.jsonl$", "nth": 3, "action": "eio"}])
    disk.freeze()                     # the instant of the cut: the disk takes nothing more
    ...                               # kill every process of the run
    lost = disk.cut("torn-byte", "subset", seed=7)   # BACKING is now what the disk held
    disk.start()                      # power back: mount again, the image is all durable

`available()` says why power cuts cannot run here (None when they can).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any, NoReturn

from host.spawn import SPAWN_CWD, module_argv

ROOT = Path(__file__).resolve().parent.parent.parent.parent
START_TIMEOUT_S = 30.0


class DiskError(RuntimeError):
    """The simulator could not do what was asked (its log is in the message)."""


def available() -> str | None:
    """None when a FUSE disk can be mounted here, else the reason (for a skip or exit 2)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse: this kernel or container offers no FUSE"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"/dev/fuse cannot be opened ({exc.strerror}): no permission to use FUSE"
    try:
        import mfusepy  # noqa: F401
    except ImportError:
        return "the FUSE binding mfusepy is not installed (pip install -e '.[test]')"
    except OSError as exc:
        return f"libfuse is not installed ({exc}; on Debian: apt-get install fuse3)"
    if os.geteuid() != 0 and not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "fusermount3 is not installed (on Debian: apt-get install fuse3)"
    return None


class LossyDisk:
    """A power-cut simulator daemon over `backing`, mounted at `mount`."""

    def __init__(
        self, backing: Path, mount: Path, model: str, state: Path, trace: Path | None = None
    ) -> None:
        self.backing = Path(backing).absolute()  # the daemon starts in SPAWN_CWD
        self.mount = Path(mount).absolute()
        self.model = model
        self.trace = Path(trace).absolute() if trace is not None else None  # trace.py
        self.state = Path(state).absolute()  # the control socket and the daemon's log
        self.key = secrets.token_bytes(16)
        self.process: subprocess.Popen[bytes] | None = None
        self.mounts = 0
        self._conn: Connection | None = None
        self._calls = threading.Lock()  # one request at a time on the connection

    @property
    def log(self) -> Path:
        return self.state / "disk.log"

    @property
    def socket(self) -> Path:
        return self.state / "disk.sock"

    def start(self) -> None:
        """Mount (BACKING as it is now is all durable); DiskError when it does not come up."""
        for path in (self.backing, self.mount, self.state):
            path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        env = dict(os.environ, POWERCUT_KEY=self.key.hex(), PYTHONPATH=str(ROOT))
        args = ["serve", str(self.backing), str(self.mount), "--model", self.model]
        args += ["--trace", str(self.trace)] if self.trace is not None else []
        command = module_argv(sys.executable, "jmp_lab.chaos.powercut", args)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--control", str(self.socket)],
                cwd=SPAWN_CWD,  # -P and /: nothing of the runner's directory is importable
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,  # a cut's kill of the run's process group spares it
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not os.path.ismount(self.mount):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self._give_up("the disk did not mount")
            time.sleep(0.01)
        self.mounts += 1

    def _give_up(self, what: str) -> NoReturn:
        self.kill()
        tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        raise DiskError(f"{what} at {self.mount} (model {self.model}); its log:\n{tail}")

    def call(self, op: str, **fields: Any) -> Any:
        with self._calls:
            try:
                if self._conn is None:
                    self._conn = Client(str(self.socket), family="AF_UNIX", authkey=self.key)
                self._conn.send({"op": op, **fields})
                reply = self._conn.recv()
            except (EOFError, OSError) as exc:
                self._lost(op, exc)
        if "error" in reply:
            raise DiskError(f"the disk refused {op}: {reply['error']}")
        return reply["ok"]

    def _lost(self, op: str, exc: BaseException) -> NoReturn:
        """The daemon went away during `op`: say how it ended, with its log."""
        code = None
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=15)
        self._conn = None
        self._give_up(f"the disk went away during {op} ({exc!r}; exit status {code})")

    def status(self) -> dict[str, Any]:
        return dict(self.call("status"))

    def arm(self, rules: list[dict[str, Any]]) -> None:
        """Faults and triggers (fs.Rule fields) for what follows; earlier ones are dropped."""
        self.call("arm", rules=rules)

    def freeze(self) -> None:
        self.call("freeze")

    def wait(self, timeout: float) -> dict[str, Any] | None:
        """Until a trigger froze the disk (what fired), or None after `timeout` seconds.
        Its own connection: the runner's other calls go on meanwhile."""
        with Client(str(self.socket), family="AF_UNIX", authkey=self.key) as conn:
            conn.send({"op": "wait", "timeout": timeout})
            reply = conn.recv()
        fired: dict[str, Any] | None = reply.get("ok")
        return fired

    def cut(self, data: str = "lose", dirs: str = "lose", seed: int = 0) -> dict[str, Any]:
        """Cut the power: BACKING becomes the durable image; returns what was lost. Kill the
        run's processes first (a frozen disk makes them wait, never finish)."""
        report = dict(self.call("cut", data=data, dirs=dirs, seed=seed))
        self._ended()
        return report

    def stop(self) -> None:
        """Unmount without a cut (BACKING keeps everything), e.g. at the end of a run."""
        if self.process is None or self.process.poll() is not None:
            self._ended()
            return
        with contextlib.suppress(DiskError, OSError, EOFError):
            self.call("stop")
        self._ended()

    def _ended(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self.process is not None:
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        _unmount(self.mount)

    def kill(self) -> None:
        """The daemon gone at once (a runner that is stopping); the mount is detached."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        _unmount(self.mount)


def mounted(path: Path) -> bool:
    """Whether a mount sits at `path` (a dead FUSE daemon's too, which stat cannot see)."""
    target = os.path.abspath(path).encode().replace(b" ", b"\\040")
    with open("/proc/self/mounts", "rb") as mounts:
        return any(line.split()[1] == target for line in mounts if len(line.split()) > 1)


def _unmount(mount: Path) -> None:
    if not mounted(mount):
        return
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    command = [tool, "-u", "-z", str(mount)] if tool else ["umount", "-l", str(mount)]
    subprocess.run(command, capture_output=True, check=False)
