"""Kernel <-> warm pool messages, the code fingerprint and the confinement view both sides compare.

One unix-socket connection per spawn. Frames are a 4-byte big-endian length and a msgpack
`PoolFrame`; the kernel's `Spawn` carries file descriptors (SCM_RIGHTS) in the same sendmsg:
the worker's stdout and stderr, the read end of a pipe holding the worker's environment, the
worker's stdin when `stdin` says so (a pipe the kernel writes the MCP config into), then one
descriptor per namespace named in `namespaces`. The pool never reads either pipe: a kernel's
environment (its keys among it) and its MCP secrets are decoded only in the forked worker,
never in the pool's heap, which every later fork inherits. The pool answers `Spawned` or
`Refused`, later `Exited`; the kernel's `Release` (or closing the connection) lets the pool
reap the dead worker. No model request, prompt or session ever crosses this socket.

`code_fingerprint()` reads file metadata only (no contents): the interpreter, every site
directory's mtime (a pip install or upgrade changes it) and every .py file of our packages
(path, size, mtime). Kernel and pool compute it the same way; a difference means other code.

Each confinement view (`protocol/confinement.py`) has its own pool, in `view_dir(DIR, VIEW)`,
so differently confined kernels each find their own; and each installation has its own DIR
(`pool_dir`), so two copies of jmp never replace each other's pool.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path
from typing import Literal

import msgspec

from protocol.spawn import module_argv

POOL_VERSION = 2
MAX_FRAME = 1 << 20  # an environment is kilobytes; anything larger is an attack or a bug
ROOT = Path(__file__).resolve().parents[1]
CODE_PACKAGES = ("protocol", "workers", "jev_harness", "kernel")

RefuseCode = Literal[
    "stale", "bad_request", "unsupported_version", "fork_failed", "busy", "confined", "module"
]
# What a pool forks: jmp's own worker kinds, nothing else (a fork inherits the pool's heap).
WORKER_MODULES = ("workers.router", "workers.generator", "workers.tool", "workers.harness")
MAX_ENV_BYTES = 1 << 20  # a worker's environment, on its pipe


class PoolMsg(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="kind",
    tag=lambda name: "pool_" + "".join("_" + c.lower() if c.isupper() else c for c in name)[1:],
    forbid_unknown_fields=True,
):
    """Kernel <-> pool message."""


class Spawn(PoolMsg, frozen=True):
    """Fork a fresh worker running `python -m module *argv` in `cwd`.

    `fingerprint` is the kernel's code_fingerprint(); the pool refuses another. The fds that
    ride along, in order: the worker's stdout and stderr; the read end of a pipe holding its
    environment (`encode_env`, read by the worker only); with `stdin` its stdin (else
    /dev/null); then one fd of the kernel's own namespace for each name in `namespaces`
    (opened on /proc/self/ns/NAME), which the pool compares with its own.
    """

    fingerprint: str
    module: str
    argv: list[str]
    cwd: str
    stdin: bool = False
    namespaces: list[str] = []


class Spawned(PoolMsg, frozen=True):
    """The worker runs as `pid`, leader of its own session and process group."""

    pid: int


class Exited(PoolMsg, frozen=True):
    """The worker exited (not yet reaped: its pid stays pinned until Release)."""

    pid: int
    exit_code: int | None = None
    signal: int | None = None


class Refused(PoolMsg, frozen=True):
    """Nothing was spawned. `stale`: the pool runs other code (pool_pid: replace it);
    `confined`: the kernel's confinement differs from the pool's, or a forked worker could not
    take on the kernel's limits, umask, priority, CPU set or cgroup; `module`: not a jmp worker."""

    code: RefuseCode
    detail: str
    pool_pid: int


class Release(PoolMsg, frozen=True):
    """The kernel has killed the worker's tree: the pool may reap the zombie now."""


class Status(PoolMsg, frozen=True):
    """Ask for the pool's state (the `status` command); answered by State."""


class Stop(PoolMsg, frozen=True):
    """Ask the pool to exit now (its live workers keep running under their kernels)."""


class State(PoolMsg, frozen=True):
    """The pool's state, the answer to Status: its pid, view, code, live workers, preloads."""

    pid: int
    view: str
    fingerprint: str
    workers: int
    idle_timeout_s: float
    preloaded: list[str]


AnyPoolMsg = Spawn | Spawned | Exited | Refused | Release | Status | Stop | State


class PoolFrame(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    v: int
    body: AnyPoolMsg


class _Peek(msgspec.Struct):
    v: int


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(PoolFrame)
_peek = msgspec.msgpack.Decoder(_Peek)


class PoolVersionError(ValueError):
    """The other side speaks another pool protocol version."""


def encode(msg: AnyPoolMsg) -> bytes:
    """Length-prefixed msgpack frame."""
    body = _encoder.encode(PoolFrame(v=POOL_VERSION, body=msg))
    return struct.pack(">I", len(body)) + body


def decode(body: bytes) -> AnyPoolMsg:
    """The message in one frame body (without its length); raises PoolVersionError or
    msgspec.DecodeError / ValueError."""
    if _peek.decode(body).v != POOL_VERSION:
        raise PoolVersionError(f"pool protocol version {_peek.decode(body).v} != {POOL_VERSION}")
    return _decoder.decode(body).body


def code_fingerprint(root: Path = ROOT) -> str:
    """sha256 of the interpreter, the site directories and our packages' .py files (metadata)."""
    try:  # CPython's own sha256: hashlib's import loads OpenSSL, a cost at every kernel start
        from _sha2 import sha256
    except ImportError:  # another interpreter
        from hashlib import sha256
    h = sha256()
    exe = os.path.realpath(sys.executable)
    h.update(f"{exe}\0{sys.version}\0{_stamp(exe)}\0".encode())
    for entry in sorted({p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}):
        h.update(f"{entry}\0{_stamp(entry)}\0".encode())
    for package in CODE_PACKAGES:
        for dirpath, dirnames, filenames in os.walk(root / package):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    h.update(f"{os.path.relpath(path, root)}\0{_stamp(path)}\0".encode())
    return str(h.hexdigest())


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


_env_encoder = msgspec.msgpack.Encoder()
_env_decoder = msgspec.msgpack.Decoder(dict[str, str])


def encode_env(env: dict[str, str]) -> bytes:
    """A worker's environment as the bytes the kernel writes to its environment pipe."""
    return _env_encoder.encode(env)


def decode_env(data: bytes) -> dict[str, str]:
    """The environment read from the pipe (in the forked worker, never in the pool)."""
    return _env_decoder.decode(data)


def view_dir(directory: Path, key: str) -> Path:
    """Where the pool of one view keeps pool.sock, pool.lock, pool.pid and pool.log."""
    return directory / key


DEFAULT_IDLE_S = 10_800.0  # 3 hours, as Gradle's daemon and Bazel's server
TITLE = "jmp-warm-pool"


def pool_dir(env: dict[str, str] | os._Environ[str], uid: int, root: Path = ROOT) -> Path:
    """The per-user runtime directory of this installation: JMP_WARM_DIR, else
    $XDG_RUNTIME_DIR/jmp-warm-TAG, else /tmp/jmp-warm-UID-TAG, TAG naming where this copy of
    jmp lives (`install_tag`). Short, so the socket path (in a `view_dir` of it) fits in
    sun_path."""
    if env.get("JMP_WARM_DIR"):
        return Path(env["JMP_WARM_DIR"])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / f"jmp-warm-{install_tag(root)}"
    return Path(f"/tmp/jmp-warm-{uid}-{install_tag(root)}")


def install_tag(root: Path = ROOT) -> str:
    """8 hex digits of where this copy of jmp's code lives. Two installations on one machine
    (two checkouts, a `uv tool` and a `pipx` one) run different code: sharing one pool dir,
    each would find the other's pool stale and replace it on every run, so each has its own."""
    try:  # as in code_fingerprint: hashlib's import loads OpenSSL
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256
    return str(sha256(os.fsencode(root)).hexdigest()[:8])


def idle_timeout(env: dict[str, str] | os._Environ[str]) -> float:
    """JMP_WARM_IDLE_S (seconds, > 0), default 10,800 (3 hours)."""
    try:
        value = float(env.get("JMP_WARM_IDLE_S") or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def serve_argv(
    python: str, directory: Path, idle_s: float, preload: str = "all", also: tuple[str, ...] = ()
) -> list[str]:
    """The pool's command line; the padding leaves room to retitle forked workers in `ps`.
    `also`: modules to fork besides jmp's workers (the tests' fake worker)."""
    pad = "--pad=" + "-" * 3000
    args = ["serve", str(directory), f"--idle={idle_s:g}", f"--preload={preload}"]
    return module_argv(python, "workers.pool", [*args, *(f"--also-fork={m}" for m in also), pad])


_POOL_ENV_KEYS = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "JMP_WARM_DIR",
    "JMP_WARM_IDLE_S",
    # They choose the TLS trust store the pool parses once for its forks (workers/tls.py): a
    # pool without them built the default one, no kernel on a machine that sets them (this
    # one does) could reuse it, and every forked router parsed the CA bundle again (~35 ms).
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


def pool_env(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The pool's own environment: an allowlist, so no key or setting of any kernel is in it
    (each forked worker gets its kernel's environment in the Spawn request instead)."""
    out = {k: env[k] for k in _POOL_ENV_KEYS if env.get(k)}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1"}
    return out
