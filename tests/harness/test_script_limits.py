"""Task scripts run with resource limits (issue 32 item 5): memory, file size, CPU time and
processes, in check-task's probe and in `jev-harness run`'s harness worker on both spawn paths
(a warm pool's fork and `JMP_WARM=0`); a script that hits one ends with an error naming it;
a bad JEV_HARNESS_* value exits 2 naming the variable."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from host import pool as H
from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import ROOT, HarnessCli
from tests.harness.test_check_task import FORK_EXEC
from tests.security.paths import PATHS
from tests.support.warm import launch_pool, make_pool_dir, pool_pids

WHERE = "open({where!r}, 'w').write(open('/proc/%d/cmdline' % __import__('os').getppid()).read())"
SMALL = '{"JEV_HARNESS_MEMORY_MB": "64"}'
TOUCH = "for i in range(0, len(m), 4096):\n    m[i] = 1\n"
HOGS = {
    "memory": ("{}", "b = bytearray(1536 << 20)\nb[::4096] = b'x' * len(b[::4096])\n"),
    "file": ('{"JEV_HARNESS_FILE_MB": "1"}', "open('big.bin', 'wb').write(b'x' * (2 << 20))\n"),
    "cpu": ('{"JEV_HARNESS_CPU_S": "2"}', "while True:\n    pass\n"),
    # RLIMIT_DATA counts no shared mapping: 300 MB of `mmap.mmap(-1, N)` went through under
    # 64 MiB (the budget hook refuses it); a private one is data; /dev/zero mapped shared is
    # shared anonymous memory no hook sees (RLIMIT_AS, at the budget + AS_HEADROOM_MB)
    "shared-mmap": (SMALL, "import mmap\nm = mmap.mmap(-1, 300 << 20)\n" + TOUCH),
    "private-mmap": (
        SMALL,
        "import mmap\nm = mmap.mmap(-1, 300 << 20, flags=mmap.MAP_PRIVATE)\n" + TOUCH,
    ),
    "zero-mmap": (
        SMALL,
        "import mmap, os\nfd = os.open('/dev/zero', os.O_RDWR)\n"
        "m = mmap.mmap(fd, 600 << 20, flags=mmap.MAP_SHARED)\n" + TOUCH,
    ),
    # soft limits in `run` (the browser's are the user's): the script may not lift its own
    "lifted": (
        "{}",
        "import resource\ntry:\n    resource.setrlimit(resource.RLIMIT_DATA, (-1, -1))\n"
        "except PermissionError:\n    pass\nb = bytearray(1536 << 20)\n",
    ),
}
NAMED = {
    "memory": "the memory limit (JEV_HARNESS_MEMORY_MB=1024)",
    "file": "the file size limit (JEV_HARNESS_FILE_MB=1)",
    "cpu": "the CPU time limit (2 s of CPU",
    "lifted": "the memory limit (JEV_HARNESS_MEMORY_MB=1024)",
    "shared-mmap": "the memory limit (JEV_HARNESS_MEMORY_MB=64)",
    "private-mmap": "the memory limit (JEV_HARNESS_MEMORY_MB=64)",
    "zero-mmap": "the memory limit (JEV_HARNESS_MEMORY_MB=64)",
}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def _script(tmp: Path, body: str, where: Path | None = None) -> Path:
    script = tmp / "hog_task.py"
    head = WHERE.format(where=str(where)) + "\n" if where else ""
    tail = "import jev_harness as jev\nworkflow = jev.TaskScript(lambda inputs: None)\n"
    script.write_text(head + body + tail)
    return script


@pytest.mark.parametrize("hog", sorted(HOGS))
@pytest.mark.parametrize("path", ["warm", "cold"])
def test_a_run_that_hits_a_limit_ends_naming_it(cli: HarnessCli, path: str, hog: str) -> None:
    env, body = HOGS[hog]
    cli.extra_env.update(json.loads(env))
    cli.extra_env.update(PATHS[path].env())
    PATHS[path].prepare()
    where = cli.tmp / "parent.txt"
    script = _script(cli.tmp, body, where)
    for _ in range(3):  # a loaded pool may be passed over for a cold spawn: then again
        out = cli.run(script, "use what it takes", {}, "--timeout", "60")
        said = out.stdout + out.stderr
        assert out.code == 2, said[-3000:]
        assert NAMED[hog] in said, said[-3000:]
        assert "Traceback" not in said
        big = cli.cwd / "big.bin"
        assert not big.exists() or big.stat().st_size <= 1 << 20
        if (H.TITLE in where.read_text()) is (path == "warm"):
            break  # the path really taken
    else:
        pytest.fail(f"no run took the {path} path: {where.read_text()!r}")


@pytest.mark.parametrize("hog", ["shared-mmap", "private-mmap", "zero-mmap"])
@pytest.mark.parametrize("path", ["warm", "cold"])
def test_the_mcp_server_names_the_limit_its_script_hits(
    cli: HarnessCli, path: str, hog: str
) -> None:
    """jev-harness-mcp loads the script in the same harness worker, under the same limits: a
    server whose script hits one at load exits 2 naming it."""
    env, body = HOGS[hog]
    PATHS[path].prepare()
    where = cli.tmp / "parent.txt"
    script = _script(cli.tmp, body, where)
    mcp = [sys.executable, "-m", "jev_harness.mcp", str(script), "--goal", "g", "--inputs", "{}"]
    for _ in range(3):  # a loaded pool may be passed over for a cold spawn: then again
        served = subprocess.run(
            [*mcp, "--sessions-dir", str(cli.home), "--direct-only"],
            cwd=cli.cwd,
            env={**cli.env(), **json.loads(env), **PATHS[path].env()},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert served.returncode == 2, served.stderr[-3000:]
        assert NAMED[hog] in served.stderr, served.stderr[-3000:]
        assert "Traceback" not in served.stderr
        if (H.TITLE in where.read_text()) is (path == "warm"):
            break  # the path really taken
    else:
        pytest.fail(f"no server took the {path} path: {where.read_text()!r}")


@pytest.mark.parametrize("hog", ["memory", "cpu", "shared-mmap", "private-mmap"])
def test_check_task_probe_hits_the_limit_and_names_it(short_tmp: Path, hog: str) -> None:
    env, body = HOGS[hog]
    script = _script(short_tmp, body)
    done = _check(script, short_tmp, json.loads(env))
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert NAMED[hog] in verdict["problems"][0], verdict


def test_check_task_starts_no_process_even_as_root(short_tmp: Path) -> None:
    """RLIMIT_NPROC does not bind root; the confined probe refuses every new process."""
    marker = f"jmp-nproc-{os.getpid()}"
    body = FORK_EXEC + textwrap.dedent(
        f"""
        started = 0
        for _ in range(20):
            spawn("/bin/sleep", "30", "{marker}")
            started += 1
        """
    )
    script = _script(short_tmp, body)
    done = _check(script, short_tmp, {})
    verdict = json.loads(done.stdout)
    assert done.returncode == 2 and "Operation not permitted" in verdict["problems"][0], verdict
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert found.stdout == "", found.stdout


@pytest.mark.timeout(600)  # that user's pool preloads every kind first
@pytest.mark.parametrize("path", ["warm", "cold"])
def test_a_run_as_another_user_has_a_process_limit(cli: HarnessCli, path: str) -> None:
    """RLIMIT_NPROC counts the real uid's processes: set to their count plus the limit (root
    is exempt from it, so this runs as uid 65534)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.getuid() != 0:
        pytest.skip("needs root and setpriv to run as uid 65534")
    for d in (cli.tmp, cli.cwd):
        d.chmod(0o777)
    where = cli.tmp / "parent.txt"
    body = FORK_EXEC + "for _ in range(40):\n    spawn('/bin/sleep', '5')\n"
    script = _script(cli.tmp, body, where)
    script.chmod(0o644)
    # CAP_DAC_READ_SEARCH only so that uid 65534 reaches this Python (under /root here); it
    # is no exemption from RLIMIT_NPROC (CAP_SYS_RESOURCE and CAP_SYS_ADMIN are).
    wrap = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    wrap += ["--inh-caps", "+dac_read_search", "--ambient-caps", "+dac_read_search"]
    cli.extra_env["JEV_HARNESS_MAX_PROCESSES"] = "8"
    pool_dir = make_pool_dir("n")
    try:
        if path == "warm":  # that user's own pool, started as that user
            os.chown(pool_dir, 65534, 65534)
            cli.extra_env.update(JMP_WARM="1", JMP_WARM_DIR=str(pool_dir))
            _pool_as(pool_dir, wrap)
        else:
            cli.extra_env["JMP_WARM"] = "0"
        out = cli.call([*wrap, *cli.run_argv(script, "fork a lot", {})])
    finally:
        for pid in pool_pids(pool_dir):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(pool_dir, ignore_errors=True)
    said = out.stdout + out.stderr
    assert out.code == 2, said[-3000:]
    assert "the process limit (JEV_HARNESS_MAX_PROCESSES=8)" in said, said[-3000:]
    assert (H.TITLE in where.read_text()) is (path == "warm")


def _pool_as(directory: Path, wrap: list[str]) -> None:
    """A pool started under `wrap`, once it answers that user (it answers no other uid)."""
    launch_pool(directory, wrap)
    ask = "from tests.support.warm import ask_status as a; import sys, pathlib; "
    ask += "print(a(pathlib.Path(sys.argv[1])))"
    argv = [*wrap, sys.executable, "-c", ask, str(directory)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    for _ in range(600):  # bounded by tries, not by a clock
        said = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if said.stdout.strip() not in ("", "None"):
            return
        time.sleep(0.5)
    pytest.fail("the pool of uid 65534 never answered")


@pytest.mark.parametrize(
    "variable,value",
    [
        ("JEV_HARNESS_MEMORY_MB", "lots"),
        ("JEV_HARNESS_FILE_MB", "0"),
        ("JEV_HARNESS_MAX_PROCESSES", "-1"),
        ("JEV_HARNESS_CPU_S", "1.5"),
    ],
)
def test_a_bad_limit_exits_2_naming_it(
    cli: HarnessCli, variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(cli.tmp, "")
    cli.extra_env[variable] = value
    out = cli.run(script, "anything", {})
    assert out.code == 2 and variable in out.stderr, out.stderr[-2000:]
    assert not cli.home.exists() or not any(cli.home.iterdir())  # no session was made
    checked = _check(script, cli.tmp, {variable: value})
    assert checked.returncode == 2 and variable in checked.stderr, checked.stderr
    mcp = [sys.executable, "-m", "jev_harness.mcp", str(script), "--goal", "g", "--inputs", "{}"]
    served = subprocess.run(
        [*mcp, "--sessions-dir", str(cli.home)],
        cwd=cli.cwd,
        env=cli.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert served.returncode == 2 and variable in served.stderr, served.stderr
    from jev_harness.session import open_session
    from kernel.errors import UsageError

    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError, match=variable):  # the Python API: before any worker
        open_session(script, "g", {}, sessions_dir=cli.home, direct_only=True)


def _check(script: Path, cwd: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "jev_harness.cli", "check-task", str(script), "--json"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **extra}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_soft_limits_cannot_be_lifted_from_python(tmp_path: Path) -> None:
    """`run`'s soft limits (`apply(..., hard=False)`, the harness worker's) are fixed for the
    script: the audit hook refuses `resource.setrlimit`. Before, `apply` reused its `hard`
    argument for the CPU limit (an int, always true), so the hook was never installed and a
    script could raise its own soft limits back to the hard ones."""
    probe = textwrap.dedent("""
        import resource, threading
        from jev_harness import limits
        from protocol.limits import ScriptLimits
        limits.apply(ScriptLimits(), 60, threading.current_thread(), hard=False)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        try:
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        except PermissionError as exc:
            print("refused:", exc)
        else:
            print("lifted")
    """)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: resource.setrlimit"), done.stdout + done.stderr
