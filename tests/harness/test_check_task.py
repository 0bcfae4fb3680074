"""`jev-harness check-task`: static, network-free, writes nothing (bytecode included)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

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
