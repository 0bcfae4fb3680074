"""Kernel <-> warm pool messages and their codec.

One unix-socket connection per spawn. Frames are a 4-byte big-endian length and a msgpack
`PoolFrame`; the kernel's `Spawn` carries file descriptors (SCM_RIGHTS) in the same sendmsg:
the worker's stdout and stderr, the read end of a pipe holding the worker's environment, the
worker's stdin when `stdin` says so (a pipe the kernel writes the MCP config into), then one
descriptor per namespace named in `namespaces`, then the proof of the Landlock domain
(`Spawn.proof`). The pool never reads either pipe: a kernel's
environment (its keys among it) and its MCP secrets are decoded only in the forked worker,
never in the pool's heap, which every later fork inherits. The pool answers `Spawned` or
`Refused`, later `Exited`; the kernel's `Release` (or closing the connection) lets the pool
reap the dead worker. No model request, prompt or session ever crosses this socket.

Where a pool lives, what it runs with and the code fingerprint both sides compare:
`host/pool.py`.
"""

from __future__ import annotations

import struct
from typing import Literal

import msgspec

POOL_VERSION = 3  # 3: Spawn carries the kernel's securebits and its Landlock probe
MAX_FRAME = 1 << 20  # an environment is kilobytes; anything larger is an attack or a bug

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

    `securebits`: the kernel's own (only a process itself can read them), compared with the
    pool's. `probe`: the pid of the kernel's Landlock probe (`host/landlock.py`), a child of
    the kernel alive until the answer: the pool reads its /proc entry (Landlock domain, root
    directory) and checks that it is the kernel's child. With `proof`, one more fd rides
    last: the working directory of the pool's own probe, opened through /proc/PID/cwd (it has
    no other name), which only a process in the pool's Landlock domain or an enclosing one can
    open; the pool refuses a Spawn without it.
    """

    fingerprint: str
    module: str
    argv: list[str]
    cwd: str
    stdin: bool = False
    namespaces: list[str] = []
    securebits: int = -1
    probe: int = 0
    proof: bool = False


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


_env_encoder = msgspec.msgpack.Encoder()
_env_decoder = msgspec.msgpack.Decoder(dict[str, str])


def encode_env(env: dict[str, str]) -> bytes:
    """A worker's environment as the bytes the kernel writes to its environment pipe."""
    return _env_encoder.encode(env)


def decode_env(data: bytes) -> dict[str, str]:
    """The environment read from the pipe (in the forked worker, never in the pool)."""
    return _env_decoder.decode(data)
