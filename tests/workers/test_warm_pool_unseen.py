"""Issue 32 item 1: confinements the pool cannot read from /proc are honoured all the same.

A warm worker never has fewer restrictions than a cold one would. Landlock shows its domain
nowhere: a Landlocked kernel gets no fork of a pool outside its domain, a pool started in one
serves no kernel outside it, and each `landlock_restrict_self` is a domain of its own (the
probes of host/landlock.py). Securebits are readable only by their process: a root program
that sets SECBIT_NOROOT before embedding jmp gets workers without capabilities, as its cold
workers are. The root directory (chroot) is compared through the kernel's probe.

Fake workers through private pools (`--preload none`), as in test_warm_pool.py; the Landlock
rules are tests/support/landlock.py's (writes only under /tmp, /dev and /proc).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import landlock
from tests.support.warm import ROOT, make_pool_dir, private_pool
from tests.workers.test_warm_pool import fake, kernel_under

LANDLOCK = [sys.executable, "-m", "tests.support.landlock", "--write", "/tmp,/dev,/proc", "--"]
NEEDS_LANDLOCK = pytest.mark.skipif(bool(landlock.available()), reason=landlock.available())
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="securebits and chroot need root")


def cap_eff(pid: int) -> str:
    with open(f"/proc/{pid}/status") as status:
        return next(line.split()[1] for line in status if line.startswith("CapEff:"))


@NEEDS_LANDLOCK
def test_a_landlocked_kernel_gets_no_worker_of_a_pool_outside_its_domain(short_tmp: Path) -> None:
    """The issue's case: an unconfined pool (one an unconfined run started) and a Landlocked
    kernel. Before: the view matched, the fork had no Landlock domain and wrote anywhere."""
    with private_pool() as pool:
        with kernel_under(LANDLOCK, short_tmp / "k") as (kernel, worker):
            assert psutil.Process(worker).ppid() == kernel  # cold: in the kernel's domain
        assert "forked" not in pool.log()
        with fake(short_tmp) as unconfined:  # the pool still serves its own domain
            unconfined.wait_ready(60)
            assert psutil.Process(unconfined.pid).ppid() == pool.pid


# Under one Landlock domain: a pool, then a kernel that asks it for a fake worker.
SAME_DOMAIN = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import psutil
    from tests.support import landlock
    landlock.restrict_writes(["/tmp", "/dev", "/proc"])
    from tests.support.warm import PoolProc
    from kernel.supervision.supervisor import Worker
    pool = PoolProc(Path(sys.argv[1]))
    os.environ |= {"JMP_WARM": "1", "JMP_WARM_DIR": sys.argv[1]}
    w = Worker("tool", sys.argv[2], env={"JMP_FAKE_MODE": "ok"}, module="tests.fakes.worker")
    w.start()
    w.wait_ready(60)
    print(json.dumps({"pool": pool.pid, "parent": psutil.Process(w.pid).ppid()}), flush=True)
    sys.stdin.read()
    w.close()
    pool.kill()
    """
)


@contextlib.contextmanager
def pool_in_a_landlock_domain(directory: Path, runtime: Path) -> Iterator[dict[str, int]]:
    """A pool started in a fresh Landlock domain and a kernel of that same domain that got a
    worker from it: {"pool": its pid, "parent": the worker's parent}."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SAME_DOMAIN, str(directory), str(runtime)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        found = json.loads(proc.stdout.readline() or "{}")
        assert found, f"the Landlocked pool and kernel exited {proc.wait()}"
        yield found
    finally:
        proc.stdin.close()
        proc.wait(60)
        proc.stdout.close()


@NEEDS_LANDLOCK
def test_a_pool_started_in_a_landlock_domain_serves_that_domain_and_no_other(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel of the pool's own domain (started by the same sandbox instance) gets a fork;
    an unconfined kernel does not (the fork would carry the pool's ruleset), nor does a kernel
    Landlocked separately with the very same rules (another domain)."""
    directory = make_pool_dir()
    try:
        with pool_in_a_landlock_domain(directory, short_tmp / "same") as found:
            assert found["parent"] == found["pool"]  # warm, inside the one domain
            monkeypatch.setenv("JMP_WARM", "1")
            monkeypatch.setenv("JMP_WARM_DIR", str(directory))
            with fake(short_tmp) as unconfined:
                unconfined.wait_ready(60)
                assert psutil.Process(unconfined.pid).ppid() == os.getpid()  # cold
            with kernel_under(LANDLOCK, short_tmp / "other") as (kernel, worker):
                assert psutil.Process(worker).ppid() == kernel  # cold: a domain of its own
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# A root program that sets SECBIT_NOROOT and its lock, then embeds jmp (keeping its own
# capabilities: only what it executes from now on loses them).
NOROOT_KERNEL = textwrap.dedent(
    """
    import ctypes, json, os, sys
    from kernel.supervision.supervisor import Worker
    SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1, 2
    if ctypes.CDLL(None).prctl(28, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0) != 0:
        sys.exit("PR_SET_SECUREBITS refused")
    w = Worker("tool", sys.argv[1], env={"JMP_FAKE_MODE": "ok"}, module="tests.fakes.worker")
    w.start()
    w.wait_ready(60)
    print(json.dumps({"kernel": os.getpid(), "worker": w.pid}), flush=True)
    sys.stdin.read()
    w.close()
    """
)


@ROOT_ONLY
@pytest.mark.parametrize("path", ["warm", "cold"])
def test_a_root_program_with_secbit_noroot_gets_workers_without_capabilities(
    short_tmp: Path, path: str
) -> None:
    """Before: an unconfined root pool forked it a worker with every capability
    (CapEff 000001fffeffffff), where a cold worker, exec'd under NOROOT, has none."""
    with private_pool() as pool:
        env = os.environ | {"PYTHONPATH": str(ROOT), "JMP_WARM": "1" if path == "warm" else "0"}
        proc = subprocess.Popen(
            [sys.executable, "-c", NOROOT_KERNEL, str(short_tmp / "k")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            ids = json.loads(proc.stdout.readline() or "{}")
            assert ids, f"the kernel exited {proc.wait()}"
            assert int(cap_eff(ids["kernel"]), 16) != 0  # the embedding program keeps its own
            assert cap_eff(ids["worker"]) == "0000000000000000"
            assert psutil.Process(ids["worker"]).ppid() == ids["kernel"]  # none is warm
        finally:
            proc.stdin.close()
            proc.wait(60)
            proc.stdout.close()
        assert "forked" not in pool.log()


def test_the_view_names_securebits_and_the_root_directory() -> None:
    """What the view holds that /proc/PID/status does not: a change of either is another
    view (so another pool directory), and the pool compares both."""
    from host import confinement as C

    view = C.own_view()
    root = os.stat("/")
    assert view["root"] == f"{root.st_dev}:{root.st_ino}"
    secure = ctypes.CDLL(None).prctl(C.PR_GET_SECUREBITS, 0, 0, 0, 0)
    assert view["securebits"] == str(secure & ~C.SECBIT_KEEP_CAPS)


CHROOTED = textwrap.dedent(
    """
    import os, socket, sys
    from kernel.supervision import pool_checks, pool_client
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(sys.argv[1])
    _problem, proof = pool_checks.listener_problem(sock)
    null = os.open(os.devnull, os.O_RDWR)
    pool_client.fingerprint()  # of our code, read (and kept) while it is still in sight
    os.chroot(sys.argv[2])  # what the root program does before embedding jmp
    os.chdir("/")
    argv = [sys.executable, "-m", "tests.fakes.worker", "ipc:///nowhere"]
    reply = pool_client._request(sock, argv, {}, [null, null], None, proof)
    print(type(reply).__name__, getattr(reply, "code", "-"), getattr(reply, "detail", "-"))
    """
)


@contextlib.contextmanager
def jail(path: Path) -> Iterator[Path]:
    """A root directory holding what the kernel's probe needs: `cat` and its libraries, and
    /proc (mounted there, unmounted at the end)."""
    cat = shutil.which("cat") or "/bin/cat"
    libs = subprocess.run(["ldd", cat], capture_output=True, text=True).stdout.split()
    for file in [cat, *(p for p in libs if p.startswith("/"))]:
        target = path / file.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(file), target)
    for name in ("usr/bin/cat", "bin/cat"):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        if not (path / name).exists():
            shutil.copy2(os.path.realpath(cat), path / name)
    (path / "proc").mkdir()
    (path / "dev").mkdir()
    (path / "dev/null").touch()
    subprocess.run(["mount", "-t", "proc", "proc", str(path / "proc")], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path / "proc")], check=False)


@ROOT_ONLY
@pytest.mark.skipif(shutil.which("mount") is None, reason="needs mount(8) for the jail's /proc")
def test_the_pool_refuses_a_kernel_with_another_root_directory(short_tmp: Path) -> None:
    """A kernel in a chroot (its probe, exec'd there, shows it): no fork of the pool, whose
    root is the real one, ever serves it."""
    with private_pool() as pool, jail(short_tmp / "jail") as root:
        done = subprocess.run(
            [sys.executable, "-c", CHROOTED, str(pool.sock), str(root)],
            capture_output=True,
            text=True,
            cwd=str(ROOT),
            env=os.environ | {"PYTHONPATH": str(ROOT), "JMP_WARM_DIR": str(pool.dir)},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        answer = done.stdout.split(maxsplit=2)
        assert answer[:2] == ["Refused", "confined"] and "root" in answer[2], answer
        assert "forked" not in pool.log()


def test_a_pool_whose_landlock_probe_is_gone_exits(short_tmp: Path) -> None:
    """A pool whose domain could no longer be told (its probe killed) exits; the kernel
    spawns cold (and starts a new pool)."""
    with private_pool() as pool:
        (probe,) = [c for c in psutil.Process(pool.pid).children() if c.name() == "cat"]
        probe.kill()
        assert pool.proc.wait(30) == 0
        assert "the Landlock probe exited" in pool.log()  # (the next pool truncates the log)
        with fake(short_tmp) as worker:
            worker.wait_ready(60)
            assert psutil.Process(worker.pid).ppid() == os.getpid()
