"""Thousands of random, truncated and wrong-version frames: both ends stay up and keep serving."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from kernel.supervision.supervisor import Worker
from protocol.codec import decode_from_worker, decode_to_worker, encode_frame
from protocol.messages import Cancel, Failed, Heartbeat, Ready, RunTool, ToolResult
from tests.support.workers import close_within, fake_worker, pid_running, wait_until
from workers.base import KERNEL_SILENCE_S, SILENCE_ENV, kernel_silence_s

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["heartbeat", "route", "generate", "list_tools", "validate", "run_tool", "cancel", "ready"]
KINDS += ["tool_result", "failed", "progress", "nonsense"]


def random_frame(rng: random.Random) -> bytes:
    """One frame that is wrong in a random way (bytes, truncation, version, body)."""
    good = encode_frame(RunTool(id="r", tool="echo", arguments={"a": [1, 2]}))
    match rng.randrange(5):
        case 0:
            return rng.randbytes(rng.randrange(0, 80))
        case 1:
            return good[: rng.randrange(len(good))]
        case 2:
            return msgspec.msgpack.encode({"v": rng.choice([0, 2, 99, -1]), "body": {"id": "x"}})
        case 3:
            body: dict[str, Any] = {"kind": rng.choice(KINDS)}
            for key in rng.sample(["id", "pid", "tool", "arguments", "busy", "zzz"], 3):
                body[key] = rng.choice([1, "s", None, [1], {"k": 2}, 3.5, True])
            return msgspec.msgpack.encode({"v": 1, "body": body})
    return msgspec.msgpack.encode(rng.choice([[1, 2], "frame", 7, None, {"v": 1}]))


class FakeKernel:
    """The test plays the kernel: a bound ROUTER and a raw worker process."""

    def __init__(self, runtime: Path, env: dict[str, str] | None = None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 0)  # a ROUTER drops past its high-water mark
        endpoint = f"ipc://{runtime}/k.sock"
        self.sock.bind(endpoint)
        env = {**os.environ, **(env or {}), "JMP_KERNEL_PID": str(os.getpid())}
        env["PYTHONPATH"] = str(ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.worker", endpoint], env=env, cwd=ROOT
        )
        self.ident = b""
        assert isinstance(self.recv(10), Ready)

    def recv(self, timeout_s: float, skip_heartbeats: bool = True) -> Any:
        deadline = time.monotonic() + timeout_s
        while self.sock.poll(max(0, int((deadline - time.monotonic()) * 1000))):
            self.ident, buf = self.sock.recv_multipart()
            msg = decode_from_worker(buf)
            if not (skip_heartbeats and isinstance(msg, Heartbeat)):
                return msg
        raise AssertionError("the worker did not answer in time")

    def send(self, buf: bytes) -> None:
        self.sock.send_multipart([self.ident, buf])

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.sock.close()
        self.ctx.term()


@pytest.fixture
def kernel(short_tmp: Path) -> Iterator[FakeKernel]:
    fake = FakeKernel(short_tmp)
    try:
        yield fake
    finally:
        fake.close()


SILENCE_S = 2.0  # the worker's silence window in the tests of it (the default is 120 s)


@pytest.fixture
def quiet_kernel(short_tmp: Path) -> Iterator[FakeKernel]:
    """A stand-in kernel whose worker has a silence window of SILENCE_S (JMP_KERNEL_SILENCE_S,
    read at worker start): the tests of that window wait it out."""
    fake = FakeKernel(short_tmp, {SILENCE_ENV: str(SILENCE_S)})
    try:
        yield fake
    finally:
        fake.close()


def test_worker_answers_every_bad_frame_and_keeps_serving(kernel: FakeKernel) -> None:
    rng = random.Random(20261129)
    sent = 0
    for n in range(3000):
        frame = random_frame(rng)
        try:
            decode_to_worker(frame)
            continue  # valid by chance: not garbage
        except Exception:
            pass
        kernel.send(frame)
        sent += 1
        if n % 100 == 0:
            kernel.send(encode_frame(Heartbeat(pid=os.getpid())))
    codes = []
    for n in range(sent):
        if n % 100 == 0:  # stay the worker's live kernel while it drains (silence = exit)
            kernel.send(encode_frame(Heartbeat(pid=os.getpid())))
        codes.append(kernel.recv(10))
    assert all(isinstance(c, Failed) for c in codes)
    assert {c.code for c in codes} == {"bad_request", "unsupported_version"}
    kernel.send(encode_frame(RunTool(id="ok", tool="echo", arguments={"n": 1})))
    reply = kernel.recv(10)
    assert isinstance(reply, ToolResult) and reply.reply_to == "ok" and reply.text == '{"n":1}'


def test_bad_frames_name_the_problem(kernel: FakeKernel) -> None:
    kernel.send(msgspec.msgpack.encode({"v": 2, "body": {"kind": "run_tool", "id": "r9"}}))
    failed = kernel.recv(10)
    assert failed.code == "unsupported_version" and failed.reply_to == "r9"
    bad = {"v": 1, "body": {"kind": "run_tool", "id": "r8", "tool": 3, "arguments": {}}}
    kernel.send(msgspec.msgpack.encode(bad))
    failed = kernel.recv(10)
    assert failed.code == "bad_request" and failed.reply_to == "r8"
    assert "$.body.tool" in failed.detail  # msgspec's path
    kernel.send(b"\xc1")
    failed = kernel.recv(10)
    assert failed.code == "bad_request" and failed.reply_to is None


def test_second_request_while_busy_is_refused(kernel: FakeKernel) -> None:
    kernel.send(encode_frame(RunTool(id="slow", tool="sleep", arguments={"seconds": 30})))
    wait_until(lambda: kernel.recv(2, skip_heartbeats=False).busy == "slow", 3, "a busy beat")
    kernel.send(encode_frame(RunTool(id="other", tool="echo", arguments={})))
    refused = kernel.recv(10)
    assert (
        refused.reply_to == "other" and refused.code == "bad_request" and "busy" in refused.detail
    )
    kernel.send(encode_frame(Cancel(id="slow")))
    stopped = kernel.recv(10)
    assert stopped.reply_to == "slow" and stopped.interrupted


@pytest.mark.slow  # asserts a wall-clock bound
def test_worker_exits_when_the_kernel_falls_silent(quiet_kernel: FakeKernel) -> None:
    kernel = quiet_kernel
    began = time.monotonic()
    wait_until(lambda: kernel.proc.poll() is not None, SILENCE_S + 5, "the worker to quit")
    waited = time.monotonic() - began
    assert SILENCE_S - 0.5 < waited < SILENCE_S + 3 and kernel.proc.returncode == 3


def test_kernel_drops_garbage_from_any_peer(short_tmp: Path) -> None:
    worker = fake_worker(short_tmp)
    try:
        worker.wait_ready(30)
        ctx = zmq.Context()
        intruder = ctx.socket(zmq.DEALER)
        intruder.setsockopt(zmq.LINGER, 0)
        intruder.connect(worker.endpoint)
        rng = random.Random(4)
        for n in range(3000):
            intruder.send(random_frame(rng))
            if n % 500 == 0:
                intruder.send_multipart([b"a", b"b"])
                intruder.send(encode_frame(Ready(pid=worker.pid or 0, worker="tool")))
                fake = ToolResult(reply_to="mine", status="ok", text="forged")
                intruder.send(encode_frame(fake))
        reply = worker.request(RunTool(id="mine", tool="echo", arguments={"z": 0}))
        assert reply.text == '{"z":0}' and worker.alive
        intruder.close()
        ctx.term()
    finally:
        close_within(worker)
    assert not pid_running(worker.pid or 0)


def test_closed_worker_context_terminates(short_tmp: Path) -> None:
    worker: Worker = fake_worker(short_tmp)
    worker.wait_ready(30)
    close_within(worker, 5)
    assert not pid_running(worker.pid or 0)


def test_a_worker_paused_past_the_silence_window_finds_the_heartbeats_and_stays(
    quiet_kernel: FakeKernel,
) -> None:
    """Found by the chaos runner: on a loaded machine a starved worker woke up, saw no kernel
    message for the silence window and exited (status 3) while the kernel's heartbeats sat in
    its socket."""
    kernel = quiet_kernel
    kernel.send(encode_frame(Heartbeat(pid=os.getpid())))
    os.kill(kernel.proc.pid, signal.SIGSTOP)  # stands in for a worker the scheduler starves
    try:
        resume = time.monotonic() + SILENCE_S + 1.0  # longer than the silence window
        while time.monotonic() < resume:  # the live kernel keeps beating meanwhile
            kernel.send(encode_frame(Heartbeat(pid=os.getpid())))
            time.sleep(0.2)
    finally:
        os.kill(kernel.proc.pid, signal.SIGCONT)
    kernel.send(encode_frame(RunTool(id="after", tool="echo", arguments={"n": 2})))
    reply = kernel.recv(10)
    assert isinstance(reply, ToolResult) and reply.reply_to == "after"
    assert kernel.proc.poll() is None


def test_the_silence_window_is_the_default_unless_set_to_a_positive_number() -> None:
    assert KERNEL_SILENCE_S == 120.0  # silence alone: a wedged kernel (test_kernel_watch.py)
    assert kernel_silence_s({}) == KERNEL_SILENCE_S
    assert kernel_silence_s({SILENCE_ENV: "2.5"}) == 2.5
    for bad in ("", "0", "-1", "soon", "nan", "inf"):
        assert kernel_silence_s({SILENCE_ENV: bad}) == KERNEL_SILENCE_S, bad
