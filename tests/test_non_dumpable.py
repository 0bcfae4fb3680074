"""Issue 20 item 1: every jmp process that holds a key is non-dumpable before its first child
exists, on every front end: `jmp --acp` waiting for its first session, `jev-harness
check-task` (whose probe, running the script's import-time code, is its child), the Python
API once it has read its settings; workers, warm and cold (tests/workers/test_warm_pool.py,
tests/test_secrets_reach.py).

Root ignores the flag, so each process runs as root without capabilities (setpriv), as an
ordinary user would, and is looked at by another such process: /proc/PID/environ of a
non-dumpable process refuses it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.warm import ROOT

ORDINARY = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
KEY = "tsk-non-dumpable-5521Hq7Wz"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="as root, setpriv makes the ordinary user that the non-dumpable flag stops",
)


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_ACCESS_KEY"))}
    return base | {"PYTHONPATH": str(ROOT), "TYPESAFE_API_KEY": KEY, "JMP_WARM": "0"} | extra


def environment_readable(pid: int) -> bool:
    """Can a process of the same user, without capabilities, read /proc/PID/environ?"""
    done = subprocess.run([*ORDINARY, "cat", f"/proc/{pid}/environ"], capture_output=True)
    if done.returncode == 0:
        assert KEY.encode() in done.stdout  # it read the key holder's environment
    return done.returncode == 0


def test_jmp_acp_is_non_dumpable_before_its_first_session(short_tmp: Path) -> None:
    proc = subprocess.Popen(
        [*ORDINARY, sys.executable, str(ROOT / "main.py"), "--acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env(JMP_SESSIONS_DIR=str(short_tmp / "sessions")),
        cwd=short_tmp,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
        hello["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0  # it serves: main() has begun
        assert not psutil_children(proc.pid)  # no worker yet: nothing but the flag protects it
        assert not environment_readable(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(60)
        proc.stdout.close()


def psutil_children(pid: int) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process(pid).children()]


SNOOPING_TASK = textwrap.dedent(
    """
    import os, sys
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as parent:
            print("PARENT-ENVIRONMENT-READ", len(parent.read()), file=sys.stderr)
    except OSError as exc:
        print("PARENT-ENVIRONMENT-REFUSED", exc.errno, file=sys.stderr)
    """
)


def test_check_task_is_non_dumpable_before_its_probe_runs_the_scripts_code(
    short_tmp: Path,
) -> None:
    """The probe (its child) runs the script's import-time code, which tries to read the
    environment of its parent, the jev-harness process that holds the keys."""
    script = short_tmp / "snoop.py"
    script.write_text(SNOOPING_TASK)
    done = subprocess.run(
        [*ORDINARY, sys.executable, "-m", "jev_harness.cli", "check-task", str(script)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=short_tmp,
        timeout=120,
    )
    assert "PARENT-ENVIRONMENT-" in done.stderr, done.stderr[-2000:]  # the probe ran it
    assert "PARENT-ENVIRONMENT-READ" not in done.stderr


API = textwrap.dedent(
    """
    import sys
    from main import Settings
    Settings.environment()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_a_program_embedding_jmp_is_non_dumpable_once_it_has_read_its_settings(
    short_tmp: Path,
) -> None:
    proc = subprocess.Popen(
        [*ORDINARY, sys.executable, "-c", API],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert not environment_readable(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(60)
        proc.stdout.close()
