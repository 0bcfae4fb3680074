"""A worker that misbehaves on demand: `python -m tests.fakes.worker ENDPOINT`.

JMP_FAKE_MODE selects the behaviour:
- `ok` (default): the real `workers.base.serve` loop with a scripted handler (tools below);
- `crash_on_start`: exit 3 before saying anything;
- `setup_fails`: setup raises, so the worker reports Failed and exits;
- `stubborn`: a raw loop that ignores SIGTERM and Shutdown (only SIGKILL ends it);
- `garbage`: a raw loop that sends garbage, truncated and wrong-version frames around every
  valid message it sends;
- `bad_version`: says Ready in wire version 99.
Tools of the `ok` mode (RunTool.tool): `echo`, `sleep` (cancellable), `spawn` (starts a
`sleep` in its own session, like a shell that setsid's, then waits for cancel), `fail`,
`crash`, `die` (os._exit mid-call), `hang` (SIGSTOPs the whole worker), `ignore_cancel`,
`flood_ignoring_cancel` (progress without pause, never an answer), `progress`.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import msgspec
import zmq

from protocol.codec import decode_to_worker, encode_frame
from protocol.messages import (
    HEARTBEAT_MS,
    Heartbeat,
    ListTools,
    Progress,
    Ready,
    RunTool,
    Shutdown,
    ToolList,
    ToolResult,
)
from workers.base import RequestFailed, serve


def _result(ident: str, text: str = "", **kw: Any) -> ToolResult:
    return ToolResult(reply_to=ident, status=kw.pop("status", "ok"), text=text, **kw)


def _wait_cancel(msg: RunTool, cancel: threading.Event) -> ToolResult:
    seconds = float(msg.arguments.get("seconds", 60))
    if cancel.wait(seconds):
        if msg.arguments.get("fail_on_cancel"):
            raise RequestFailed("cancelled", "stopped before any effect")
        return _result(msg.id, "stopped", status="error", exit_code=-1, interrupted=True)
    return _result(msg.id, "slept")


def handle(msg: Any, send: Any, cancel: threading.Event) -> Any:
    """The scripted handler of `ok` mode."""
    if isinstance(msg, ListTools):
        return ToolList(reply_to=msg.id, tools=[])
    if not isinstance(msg, RunTool):
        raise RequestFailed("bad_request", f"fake worker does not serve {type(msg).__name__}")
    match msg.tool:
        case "echo":
            return _result(msg.id, msgspec.json.encode(msg.arguments).decode())
        case "sleep":
            return _wait_cancel(msg, cancel)
        case "spawn":
            argv = ["sleep", str(msg.arguments["marker"])]
            subprocess.Popen(argv, start_new_session=True)
            return _wait_cancel(msg, cancel)
        case "fail":
            raise RequestFailed("invalid_arguments", "scripted failure")
        case "crash":
            raise RuntimeError("scripted crash")
        case "die":
            os._exit(7)
        case "hang":
            os.kill(os.getpid(), signal.SIGSTOP)
        case "ignore_cancel":
            time.sleep(float(msg.arguments.get("seconds", 10)))
            return _result(msg.id, "ignored")
        case "flood_ignoring_cancel":
            while True:  # progress as fast as it can, never an answer, cancel or not
                send(Progress(reply_to=msg.id, stage="generate", characters=1))
        case "progress":
            for n in range(int(msg.arguments.get("count", 3))):
                send(Progress(reply_to=msg.id, stage="generate", characters=n + 1))
            return _result(msg.id, "done")
    raise RequestFailed("unknown_tool", msg.tool)


def _garbage(rng: random.Random) -> bytes:
    good = encode_frame(Heartbeat(pid=os.getpid()))
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randbytes(rng.randrange(0, 64))
    if choice == 1:
        return good[: rng.randrange(len(good))]
    if choice == 2:
        return msgspec.msgpack.encode({"v": 99, "body": {"kind": "heartbeat", "pid": 1}})
    return msgspec.msgpack.encode({"v": 1, "body": {"kind": "no_such_kind", "x": 1}})


def raw_loop(endpoint: str, mode: str) -> int:
    """A hand-written worker loop for the modes that break the protocol on purpose."""
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rng = random.Random(7)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)

    def send(msg: Any) -> None:
        if mode == "garbage":
            for _ in range(3):
                sock.send(_garbage(rng))
        sock.send(encode_frame(msg))

    if mode == "bad_version":
        ready = {"kind": "ready", "pid": os.getpid(), "worker": "tool"}
        sock.send(msgspec.msgpack.encode({"v": 99, "body": ready}))
    else:
        send(Ready(pid=os.getpid(), worker="tool"))
    while True:
        if sock.poll(HEARTBEAT_MS):
            msg = decode_to_worker(sock.recv())
            if isinstance(msg, Shutdown) and mode != "stubborn":
                return 0
            if isinstance(msg, RunTool):
                send(_result(msg.id, msgspec.json.encode(msg.arguments).decode()))
        send(Heartbeat(pid=os.getpid()))


def main() -> None:
    mode = os.environ.get("JMP_FAKE_MODE", "ok")
    endpoint = sys.argv[1]
    if mode == "crash_on_start":
        os._exit(3)
    if mode in ("stubborn", "garbage", "bad_version"):
        os._exit(raw_loop(endpoint, mode))

    def setup() -> None:
        if mode == "setup_fails":
            raise RuntimeError("scripted setup failure")

    os._exit(serve(endpoint, "tool", handle, setup=setup))


if __name__ == "__main__":
    main()
