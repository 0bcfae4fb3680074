"""The warm pool: forked workers keep the cold path's crash semantics; the pool costs nothing.

Each test runs its own pool in a private dir (tests/support/warm.py) with `--preload none`, so
forks are real but cheap; the fake worker (tests/fakes/worker.py) stands in for a worker kind.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import msgspec
import psutil
import pytest

from kernel.supervision import pool_client
from kernel.supervision.supervisor import Worker, WorkerDied
from protocol import pool as P
from protocol.messages import RunTool
from tests.support.warm import ROOT, PoolProc, children_of, gone, make_pool_dir, private_pool


def holding(marker: str) -> list[psutil.Process]:
    """Processes with `marker` as an argument (a `sleep MARKER` started by a worker)."""
    return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


def fake(runtime: Path, **env: str) -> Worker:
    worker = Worker(
        "tool", runtime, env={"JMP_FAKE_MODE": "ok", **env}, module="tests.fakes.worker"
    )
    worker.start()
    return worker


def test_a_worker_is_forked_fresh_by_the_pool_with_the_kernels_env_and_cwd(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(short_tmp)
    with private_pool() as pool:
        pids = []
        for n in range(2):
            with fake(short_tmp, JMP_TEST_MARK=f"mark-{n}") as worker:
                worker.wait_ready(60)
                assert psutil.Process(worker.pid).ppid() == pool.pid
                assert os.getpgid(worker.pid) == worker.pid  # its own group, like a cold spawn
                reply = worker.request(RunTool(id="1", tool="echo", arguments={"a": 1}))
                assert reply.text == '{"a":1}'
                assert psutil.Process(worker.pid).cwd() == str(short_tmp)
                pids.append(worker.pid)
            assert gone([worker.pid])
        assert pids[0] != pids[1]  # never reused
        assert "mark-" not in pool.log()  # the pool logs pids, never an environment


def test_sigkill_of_a_forked_worker_mid_call_is_worker_exit_and_kills_its_shells(
    short_tmp: Path,
) -> None:
    marker = "3344.5567"
    with private_pool() as pool, fake(short_tmp) as worker:
        worker.wait_ready(60)
        assert psutil.Process(worker.pid).ppid() == pool.pid
        result: dict[str, BaseException] = {}

        def call() -> None:
            try:
                worker.request(RunTool(id="s", tool="spawn", arguments={"marker": marker}))
            except BaseException as exc:
                result["exc"] = exc

        thread = threading.Thread(target=call)
        thread.start()
        while not holding(marker):
            assert thread.is_alive()
        os.kill(worker.pid, signal.SIGKILL)
        thread.join(30)
        died = result["exc"]
        assert isinstance(died, WorkerDied) and died.signal == signal.SIGKILL
        sleepers = [p.pid for p in holding(marker)]
        assert gone(sleepers, 5)  # the shell that left the group died with the tree
        assert not children_of(pool.pid)  # reaped by the pool once the kernel released it


KERNEL = textwrap.dedent(
    """
    import sys
    from kernel.supervision.supervisor import Worker
    from protocol.messages import RunTool
    w = Worker("tool", sys.argv[1], env={"JMP_FAKE_MODE": "ok"}, module="tests.fakes.worker")
    w.start(); w.wait_ready(60)
    print(w.pid, flush=True)
    w.request(RunTool(id="s", tool="spawn", arguments={"marker": sys.argv[2]}))
    """
)


def test_sigkill_of_the_kernel_leaves_no_forked_worker(short_tmp: Path) -> None:
    marker = "4455.6678"
    with private_pool() as pool:
        kernel = subprocess.Popen(
            [sys.executable, "-c", KERNEL, str(short_tmp), marker],
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
            env=os.environ | {"PYTHONPATH": str(ROOT)},
        )
        assert kernel.stdout is not None
        worker = int(kernel.stdout.readline())
        assert psutil.Process(worker).ppid() == pool.pid
        while not holding(marker):
            assert kernel.poll() is None
        sleepers = [p.pid for p in holding(marker)]
        kernel.kill()
        kernel.wait()
        kernel.stdout.close()
        assert gone([worker, *sleepers], 10)  # pidfd on the kernel: no orphan, shells included
        assert gone(children_of(pool.pid) and [c.pid for c in children_of(pool.pid)], 10)


@pytest.mark.parametrize("when", ["before", "after"])
def test_killing_the_pool_never_fails_a_worker(short_tmp: Path, when: str) -> None:
    with private_pool() as pool:
        if when == "before":
            pool.kill()
        with fake(short_tmp) as worker:
            worker.wait_ready(60)
            expected = pool.pid if when == "after" else os.getpid()
            assert psutil.Process(worker.pid).ppid() == expected  # cold when the pool is gone
            if when == "after":
                pool.kill()  # the worker keeps serving its kernel
                again = PoolProc(pool.dir)  # the worker does not hold the pool's lock
                again.kill()
            assert worker.request(RunTool(id="1", tool="echo", arguments={})).text == "{}"
            pid = worker.pid
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(WorkerDied):
                worker.request(RunTool(id="2", tool="echo", arguments={}))
        assert gone([pid])


def test_a_pool_that_dies_during_the_request_means_a_cold_spawn(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in pool reads the request and dies (closes) without answering."""
    directory = make_pool_dir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(directory / "pool.sock"))
    listener.listen(1)

    def die_mid_request() -> None:
        conn, _ = listener.accept()
        socket.recv_fds(conn, 65536, 4)
        conn.close()

    thread = threading.Thread(target=die_mid_request)
    thread.start()
    monkeypatch.setenv("JMP_WARM", "1")
    monkeypatch.setenv("JMP_WARM_DIR", str(directory))
    try:
        with fake(short_tmp) as worker:
            worker.wait_ready(60)
            assert psutil.Process(worker.pid).ppid() == os.getpid()
    finally:
        thread.join(10)
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_a_stale_pool_is_never_used_and_is_replaced(short_tmp: Path, tmp_path: Path) -> None:
    """A pool running a copy of the code (other files, so another fingerprint)."""
    copy = tmp_path / "old"
    for package in (*P.CODE_PACKAGES, "tests"):
        shutil.copytree(ROOT / package, copy / package, copy_function=shutil.copy)
    with private_pool(root=copy) as pool:
        assert pool.state.fingerprint != P.code_fingerprint()
        with fake(short_tmp) as worker:
            worker.wait_ready(60)
            assert psutil.Process(worker.pid).ppid() == os.getpid()  # cold, not the stale pool
        assert pool.proc.wait(30) == 0  # told to stop; a fresh pool replaces it
        assert not children_of(pool.pid)


def test_another_users_connection_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The credential check, simulated: the pool believes it belongs to another uid."""
    import workers.pool as pool_mod

    monkeypatch.setattr(pool_mod, "_SELF", os.getuid() + 1)
    assert not pool_mod.peer_allowed(os.getuid())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "p.sock"))
    listener.listen(1)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(tmp_path / "p.sock"))
    pool = pool_mod.Pool(tmp_path, 60, [])
    pool.listener = listener
    pool.accept()
    assert not pool.conns  # nothing registered: the connection was closed
    client.settimeout(5)
    assert client.recv(1) == b""
    client.close()
    listener.close()


def test_the_wire_format_is_versioned_and_bounded() -> None:
    frame = P.encode(P.Spawn(fingerprint="f", module="m", argv=[], cwd="/"))
    assert isinstance(P.decode(frame[4:]), P.Spawn)
    other = msgspec.msgpack.encode({"v": 99, "body": {"kind": "pool_status"}})
    with pytest.raises(P.PoolVersionError):
        P.decode(other)
    with pytest.raises(msgspec.ValidationError):
        P.decode(
            msgspec.msgpack.encode({"v": P.POOL_VERSION, "body": {"kind": "pool_spawn", "x": 1}})
        )


def test_the_pool_dir_must_be_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert "not private" in pool_client.check_dir(shared)
    link = tmp_path / "link"
    link.symlink_to(shared)
    assert "not a directory" in pool_client.check_dir(link)


def test_jmp_warm_0_is_the_cold_path(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with private_pool() as pool:
        monkeypatch.setenv("JMP_WARM", "0")
        with fake(short_tmp) as worker:
            worker.wait_ready(60)
            assert psutil.Process(worker.pid).ppid() == os.getpid()
        assert not children_of(pool.pid)


PRELOAD_AND_FORK = textwrap.dedent(
    """
    import os, sys, threading
    from workers.pool_child import preload, threads
    loaded = preload(["tool", "router", "generator", "harness"])
    assert loaded == ["tool", "router", "generator", "harness"], loaded
    assert threading.active_count() == 1 and threads() == 1, threads()
    import zmq
    assert zmq.Context._instance is None  # no zmq context (and its I/O threads) before fork
    pid = os.fork()  # -W error: a fork with threads would raise DeprecationWarning here
    if pid == 0:
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    print("single-threaded")
    """
)


@pytest.mark.timeout(600)  # one full import of every worker's SDKs on a shared machine
def test_the_preloaded_pool_forks_single_threaded() -> None:
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", PRELOAD_AND_FORK],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        env=P.pool_env(os.environ),
        timeout=580,
    )
    assert out.returncode == 0 and "single-threaded" in out.stdout, out.stderr[-2000:]


def test_an_idle_pool_exits_by_itself(tmp_path: Path) -> None:
    pool = PoolProc(tmp_path / "pool", idle_s=1)
    try:
        assert pool.proc.wait(60) == 0
        assert not pool.sock.exists()
        assert "idle timeout" in pool.log()
    finally:
        pool.kill()


def test_a_forked_worker_has_the_kernels_resource_limits_not_the_pools(short_tmp: Path) -> None:
    """Found by the chaos runner: a pool launched by a kernel under RLIMIT_FSIZE kept that
    limit and gave it to every worker it forked for later kernels (their writes: EFBIG)."""
    import resource

    mine = resource.getrlimit(resource.RLIMIT_FSIZE)
    with private_pool() as pool:
        resource.prlimit(pool.pid, resource.RLIMIT_FSIZE, (4096, 4096))  # its launcher's limit
        with fake(short_tmp) as worker:
            worker.wait_ready(60)
            assert resource.prlimit(worker.pid, resource.RLIMIT_FSIZE) == mine
