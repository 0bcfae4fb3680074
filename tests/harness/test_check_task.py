"""`jev-harness check-task`: static, network-free, writes nothing (bytecode included); the
escapes of an audit hook (issue 20 item 6) contained by the OS, the verdict unforgeable."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.harness.helpers import ROOT, SCRIPTS

EXAMPLE = ROOT / "examples" / "workspace_task.py"


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "jev_harness.cli", "check-task", *args]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TYPESAFE_API_KEY": "tk-0123456789"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def snapshot(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in root.rglob("*")}


def test_a_sound_script_lists_its_tools_and_labels(short_tmp: Path) -> None:
    (short_tmp / "proj").mkdir()
    inputs = {"root": "proj", "queries": ["x"], "markers": ["M1"], "output": "r.json"}
    before = snapshot(short_tmp)
    done = check(str(EXAMPLE), "--inputs", json.dumps(inputs), "--json", cwd=short_tmp)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert set(verdict) == {"ok", "problems", "tools", "labels"}
    assert verdict["ok"] is True and verdict["problems"] == []
    names = {t["name"] for t in verdict["tools"]}
    assert {"files.list", "files.search", "files.read", "save_report"} <= names
    assert verdict["labels"] == ["M1"]
    assert snapshot(short_tmp) == before  # no report, no cache, nothing


def test_without_inputs_only_the_workflow_is_checked(short_tmp: Path) -> None:
    done = check(str(SCRIPTS / "pick_task.py"), cwd=short_tmp)
    assert done.returncode == 0 and "sound" in done.stdout


def test_a_script_that_connects_at_import_is_refused_and_sends_nothing(short_tmp: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.0)
    port = listener.getsockname()[1]
    script = short_tmp / "net_task.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import socket
            socket.create_connection(("127.0.0.1", {port})).sendall(b"leak")
            import jev_harness as jev
            workflow = jev.TaskScript(lambda inputs: None)
            """
        )
    )
    before = snapshot(short_tmp)
    done = check(str(script), "--json", cwd=short_tmp)
    assert done.returncode == 2
    verdict = json.loads(done.stdout)
    assert verdict["ok"] is False
    assert "failed at import" in verdict["problems"][0] and "refused" in verdict["problems"][0]
    try:
        listener.accept()
        connected = True
    except BlockingIOError:
        connected = False
    finally:
        listener.close()
    assert not connected
    assert snapshot(short_tmp) == before  # no __pycache__ beside the script


def test_a_raw_socket_or_a_subprocess_is_refused_too(short_tmp: Path) -> None:
    for body in (
        "import _socket\n_socket.socket()",
        "import subprocess\nsubprocess.run(['true'])",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/')",
    ):
        script = short_tmp / "t.py"
        script.write_text(body + "\n")
        done = check(str(script), "--json", cwd=short_tmp)
        verdict = json.loads(done.stdout)
        assert done.returncode == 2 and not verdict["ok"], body
        assert "refused" in verdict["problems"][0], (body, verdict)


def test_a_script_that_writes_in_build_is_refused_and_writes_nothing(short_tmp: Path) -> None:
    script = short_tmp / "write_task.py"
    script.write_text(
        textwrap.dedent(
            """
            import jev_harness as jev
            def build(inputs):
                open("made.txt", "w").write("x")
                return jev.Task([])
            workflow = jev.TaskScript(build)
            """
        )
    )
    before = snapshot(short_tmp)
    done = check(str(script), "--inputs", "{}", "--json", cwd=short_tmp)
    verdict = json.loads(done.stdout)
    assert done.returncode == 2 and "build(inputs) raised" in verdict["problems"][0]
    assert snapshot(short_tmp) == before


def test_problems_are_named(short_tmp: Path) -> None:
    cases = {
        "no_workflow.py": ("x = 1\n", "defines no `workflow"),
        "two_args.py": (
            "import jev_harness as jev\nworkflow = jev.TaskScript(lambda a, b: None)\n",
            "exactly one argument",
        ),
        "raises.py": ("raise ValueError('broken at import')\n", "ValueError: broken at import"),
    }
    for name, (body, expected) in cases.items():
        (short_tmp / name).write_text(body)
        done = check(str(short_tmp / name), cwd=short_tmp)
        assert done.returncode == 2 and expected in done.stdout, (name, done.stdout)
    bad = check(str(short_tmp / "raises.py"), "--inputs", "[1", cwd=short_tmp)
    assert bad.returncode == 2 and "--inputs is not valid JSON" in bad.stderr


# --- issue 20 item 6: the escapes of an audit hook, contained by the OS -------------------------

FORK_EXEC = """
import _posixsubprocess, os
def spawn(*argv):
    # the C primitive under subprocess: no audit event, so no audit hook ever sees it
    args = [os.fsencode(a) for a in argv]
    err_r, err_w = os.pipe()
    pid = _posixsubprocess.fork_exec(
        args, [args[0]], True, (), None, None, -1, -1, -1, -1, -1, -1, err_r, err_w,
        True, True, -1, None, None, None, -1, None, False)
    os.close(err_w)
    return pid
"""


def _escape(short_tmp: Path, body: str) -> tuple[subprocess.CompletedProcess[str], Path, bool]:
    """Check a script (FORK_EXEC's `spawn` defined) with `body` at import; returns the run, a
    directory outside its view where a write would land (still empty?) and whether the
    working directory is unchanged."""
    outside = Path(tempfile.mkdtemp(prefix="jto", dir="/tmp"))
    script = short_tmp / "escape_task.py"
    script.write_text(FORK_EXEC + textwrap.dedent(body).replace("OUTSIDE", str(outside)))
    before = snapshot(short_tmp)
    done = check(str(script), "--json", cwd=short_tmp)
    return done, outside, snapshot(short_tmp) == before


def _alive(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in (proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


def test_fork_exec_starts_nothing_that_writes_or_outlives_the_check(short_tmp: Path) -> None:
    marker = f"jmp-escape-{os.getpid()}-{time.monotonic_ns()}"
    outside = None
    try:
        done, outside, unchanged = _escape(
            short_tmp,
            f"""
            import sys, time
            code = "open('OUTSIDE/w', 'w'); open('w', 'w'); import time; time.sleep(300)"
            spawn(sys.executable, "-I", "-c", code, "{marker}")
            spawn(sys.executable, "-I", "-c", "import time; time.sleep(300)", "{marker}")
            time.sleep(1)
            """,
        )
        assert done.returncode == 2, done.stdout + done.stderr  # no workflow: not sound
        assert list(outside.iterdir()) == [] and unchanged
        deadline = time.monotonic() + 30
        while _alive(marker) and time.monotonic() < deadline:
            time.sleep(0.1)  # SIGKILLed with the namespace's init; the kernel reaps them
        assert _alive(marker) == []
    finally:
        for pid in _alive(marker):  # on the old code: they held its pipes, the check hung
            os.kill(pid, signal.SIGKILL)
        if outside is not None:
            shutil.rmtree(outside, ignore_errors=True)


def test_sqlite_mkfifo_and_shared_memory_create_nothing(short_tmp: Path) -> None:
    shm = f"jmp-escape-{os.getpid()}"
    done, outside, unchanged = _escape(
        short_tmp,
        f"""
        import os, sqlite3, _posixshmem
        for attempt in (
            lambda: os.mkfifo("fifo"),
            lambda: os.mkfifo("OUTSIDE/fifo"),
            lambda: sqlite3.connect("OUTSIDE/db.sqlite").execute("create table t(x)"),
            lambda: _posixshmem.shm_open("/{shm}", os.O_CREAT | os.O_RDWR, 0o600),
            lambda: spawn("/bin/sh", "-c", "mkfifo f2; touch OUTSIDE/t; : > /dev/shm/{shm}"),
        ):
            try:
                attempt()
            except Exception:
                pass
        import time; time.sleep(0.5)
        """,
    )
    try:
        assert done.returncode == 2, done.stdout + done.stderr
        assert list(outside.iterdir()) == [] and unchanged
        assert not Path(f"/dev/shm/{shm}").exists()
    finally:
        Path(f"/dev/shm/{shm}").unlink(missing_ok=True)
        shutil.rmtree(outside, ignore_errors=True)


def test_a_forged_verdict_is_not_believed(short_tmp: Path) -> None:
    forged = json.dumps({"ok": True, "problems": [], "tools": [], "labels": []})
    done, outside, _ = _escape(
        short_tmp,
        f"""
        import os
        for fd in range(1, 1024):  # every fd it holds, the verdict's among them
            try:
                os.write(fd, {forged!r}.encode() + b"\\n")
            except OSError:
                pass
        os._exit(0)
        """,
    )
    shutil.rmtree(outside, ignore_errors=True)
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["ok"] is False and "no well-formed finding" in verdict["problems"][0]


def test_a_process_it_starts_reaches_no_socket(short_tmp: Path) -> None:
    """Not the network, and not a Unix socket in view either (a warm pool's, say)."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(short_tmp / "pool.sock"))
    unix.listen(1)
    code = (
        "import socket\n"
        f"socket.create_connection(('127.0.0.1', {tcp.getsockname()[1]})).sendall(b'leak')\n"
    )
    path = str(short_tmp / "pool.sock")
    code_unix = f"import socket\nsocket.socket(socket.AF_UNIX).connect({path!r})\n"
    try:
        done, outside, _ = _escape(
            short_tmp,
            f"""
            import sys, time
            spawn(sys.executable, "-I", "-c", {code!r})
            spawn(sys.executable, "-I", "-c", {code_unix!r})
            time.sleep(3)
            """,
        )
        shutil.rmtree(outside, ignore_errors=True)
        assert done.returncode == 2, done.stdout + done.stderr
        for listener in (tcp, unix):
            listener.settimeout(0.0)
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                continue
            conn.close()
            pytest.fail(f"the script's process reached {listener.getsockname()}")
    finally:
        tcp.close()
        unix.close()


def test_without_os_confinement_it_says_so(short_tmp: Path) -> None:
    """Where no user namespace can be made (here: a user namespace whose limit is 0), the
    check still runs, under the audit hook only, and says on stderr that it was not confined."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("util-linux unshare is needed to take user namespaces away")
    cli = [sys.executable, "-m", "jev_harness.cli", "check-task", str(SCRIPTS / "pick_task.py")]
    inner = "echo 0 > /proc/sys/user/max_user_namespaces && exec " + shlex.join(cli)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [unshare, "--user", "--map-current-user", "sh", "-c", inner],
        cwd=short_tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "sound" in done.stdout, done.stderr
    assert "without OS confinement" in done.stderr and "do not check a script" in done.stderr
    confined = check(str(SCRIPTS / "pick_task.py"), cwd=short_tmp)
    assert confined.returncode == 0 and "confinement" not in confined.stderr
