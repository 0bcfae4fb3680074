"""check-task's verdict is not the script's word (issue 32 item 4): a hostile script that
replaces json.dumps, print, sys.stdout, os._exit, the probe's framing or the probe itself,
writes verdict-shaped output on every fd, or claims `confined`, still gets the verdict the
outer process builds: the shape fixed, `ok` false for a file that binds no `workflow`, and the
unconfined warning wherever no user namespace could be made."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness.helpers import ROOT
from tests.harness.test_check_task import FORK_EXEC

SHAPE = {"ok", "problems", "tools", "labels"}
FORGED = {
    "ok": True,
    "confined": True,
    "why": None,
    "problems": [],
    "tools": [{"name": "forged", "description": "", "effect": "read", "parameters": []}],
    "labels": ["forged"],
}
# The forged verdict through json.dumps alone (how 623aa1b was fooled, `confined` included).
DUMPS = textwrap.dedent(
    f"""
    import json
    line = json.JSONEncoder().encode({{"confined": True, "why": None, "verdict": {FORGED!r}}})
    json.dumps = lambda *a, **k: line
    """
)
# The probe itself replaced (`python -m` runs it as __main__), and its framing helpers.
PROBE = textwrap.dedent(
    f"""
    import sys, msgspec
    FORGED = {FORGED!r}
    finding = msgspec.msgpack.encode({{k: FORGED[k] for k in ("problems", "tools", "labels")}})
    msgspec.msgpack.encode = lambda *a, **k: finding
    probe = sys.modules["__main__"]
    probe.probe = lambda *a, **k: dict(FORGED)
    """
)
# Everything of its own process the script can reach, replaced: the encoders, the output, the
# exit, the probe's framing helper and the probe itself, and forged lines on every fd.
HOSTILE = FORK_EXEC + textwrap.dedent(
    f"""
    import builtins, json, os, sys
    import msgspec
    FORGED = {FORGED!r}
    line = json.JSONEncoder().encode(FORGED)
    finding = msgspec.msgpack.encode(
        {{k: FORGED[k] for k in ("problems", "tools", "labels")}})
    json.dumps = lambda *a, **k: line
    msgspec.msgpack.encode = lambda *a, **k: finding
    msgspec.json.encode = lambda *a, **k: line.encode()
    builtins.print = lambda *a, **k: os.write(1, line.encode() + b"\\n")
    probe = sys.modules["__main__"]
    if hasattr(probe, "probe"):
        probe.probe = lambda *a, **k: dict(FORGED)
    for name in ("failure", "_shape"):
        if hasattr(probe, name):
            setattr(probe, name, lambda *a, **k: None)
    for fd in range(1, 64):  # every fd it holds: the verdict's, the status', stdout
        for data in (b"confined 1\\n", line.encode() + b"\\n", finding,
                     msgspec.msgpack.encode(FORGED)):
            try:
                os.write(fd, data)
            except OSError:
                pass
    # The checker's own pipes, through /proc (reachable only when not confined).
    try:
        spawn("/bin/sh", "-c",
              "for f in /proc/%d/fd/*; do echo confined 1 > $f; done 2>/dev/null" % os.getppid())
    except OSError:  # confined: no new process at all
        pass
    print(line)
    sys.stdout = open(os.devnull)
    os._exit = lambda *a: None
    """
)


def _check(
    script: Path, cwd: Path, no_userns: bool, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """check-task on `script`, in a session of its own (a script that reaches its process
    group must not reach pytest's)."""
    cli = [sys.executable, "-m", "jev_harness.cli", "check-task", str(script), "--json"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    argv = cli
    if no_userns:  # a user namespace whose limit is 0: none can be made below it
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.skip("util-linux unshare is needed to take user namespaces away")
        inner = "echo 0 > /proc/sys/user/max_user_namespaces && exec " + shlex.join(cli)
        argv = [unshare, "--user", "--map-current-user", "sh", "-c", inner]
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def _verdict(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The last stdout line is check-task's own (an unconfined script may write to our stdout
    before it: it runs with the user's rights, as the docs say)."""
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(verdict, dict)
    return verdict


@pytest.mark.parametrize("body", [DUMPS, PROBE, HOSTILE], ids=["dumps", "probe", "everything"])
@pytest.mark.parametrize("no_userns", [False, True], ids=["confined", "no-user-namespace"])
def test_a_hostile_script_without_workflow_is_not_sound(
    short_tmp: Path, no_userns: bool, body: str
) -> None:
    script = short_tmp / "hostile_task.py"
    script.write_text(body)
    done = _check(script, short_tmp, no_userns)
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = _verdict(done)
    assert set(verdict) == SHAPE, verdict  # no "confined", no "why": the shape is ours
    assert verdict["ok"] is False
    problems = verdict["problems"]
    assert isinstance(problems, list)
    assert any("defines no `workflow" in str(p) for p in problems), problems
    unconfined = "without OS confinement" in done.stderr
    assert unconfined is no_userns, done.stderr


def test_a_finding_of_another_shape_is_no_verdict(short_tmp: Path) -> None:
    """A script whose finding carries fields of its own (`ok`, `confined`) is not believed,
    even with a real workflow: the finding is decoded strictly."""
    script = short_tmp / "shape_task.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, msgspec
            import jev_harness as jev
            workflow = jev.TaskScript(lambda inputs: None)
            forged = msgspec.msgpack.encode({FORGED!r})
            for fd in range(3, 64):
                try:
                    os.write(fd, forged)
                except OSError:
                    pass
            os._exit(0)
            """
        )
    )
    done = _check(script, short_tmp, False)
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = _verdict(done)
    assert set(verdict) == SHAPE and verdict["ok"] is False
    assert "no well-formed finding" in str(verdict["problems"]), verdict


def test_a_finding_past_its_bounds_is_no_verdict(short_tmp: Path) -> None:
    script = short_tmp / "bounds_task.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, msgspec
            import jev_harness as jev
            workflow = jev.TaskScript(lambda inputs: None)
            big = msgspec.msgpack.encode(
                {"problems": [], "tools": [], "labels": ["x" * 100_000]})
            for fd in range(3, 64):
                try:
                    os.write(fd, big)
                except OSError:
                    pass
            os._exit(0)
            """
        )
    )
    done = _check(script, short_tmp, False)
    verdict = _verdict(done)
    assert done.returncode == 2 and verdict["ok"] is False, verdict
    assert "no well-formed finding" in str(verdict["problems"]), verdict


# Ways a script may try to end check-task itself (the process that builds the verdict and,
# where no user namespace could be made, warns that the script ran unconfined): each ends with
# `workflow` defined, so a check-task that lives says "sound" or names the attempt.
ATTACKS = {
    "kill-parent": "os.kill(os.getppid(), signal.SIGKILL)",
    "kill-own-group": "os.killpg(0, signal.SIGKILL)",
    "kill-itself": "os.kill(os.getpid(), signal.SIGKILL)",
    "kill-parents-group": "os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)",
    "pidfd": "signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)",
    # the kernel's signals, by way of the parent's rlimits and of SIGIO's owner
    "prlimit-cpu": "resource.prlimit(os.getppid(), resource.RLIMIT_CPU, (0, 0))\nwhile True: pass",
    "sigio-owner": "r, w = os.pipe()\nfcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())\n"
    "fcntl.fcntl(r, 10, signal.SIGKILL)  # F_SETSIG\n"
    "fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)\nos.write(w, b'x')",
    "ptrace-mem": "f = open('/proc/%d/mem' % os.getppid(), 'rb')",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("no_userns", [False, True], ids=["confined", "no-user-namespace"])
def test_a_script_cannot_end_check_task(short_tmp: Path, no_userns: bool, attack: str) -> None:
    """Before: unconfined, a script that killed its parent (check-task) ended it with 137, no
    verdict and no warning. Now check-task always lives to give a verdict of its shape (a
    sound one, the attempt refused and caught, or one naming the probe's death), and the
    warning is on stderr before any of the script's code runs."""
    body = "import fcntl, os, resource, signal\ntry:\n"
    body += textwrap.indent(ATTACKS[attack], "    ") + "\nexcept OSError as exc:\n"
    body += "    print('refused:', exc)\nimport jev_harness as jev\n"
    body += "workflow = jev.TaskScript(lambda inputs: None)\n"
    script = short_tmp / "attack_task.py"
    script.write_text(body)
    done = _check(script, short_tmp, no_userns, timeout=180)
    assert done.returncode in (0, 2), (done.returncode, done.stdout, done.stderr)
    verdict = _verdict(done)
    assert set(verdict) == SHAPE, verdict
    problems = str(verdict["problems"])
    if not no_userns:  # in its PID namespace the probe is init and its parent is 0: its own
        assert verdict["ok"] is True or "killed by" in problems or "CPU time" in problems
    elif attack == "kill-itself":  # the one signal allowed: the probe's death, named
        assert verdict["ok"] is False and "killed by SIGKILL" in problems, verdict
    else:  # refused: nothing outside the probe is reached
        assert verdict["ok"] is True, (verdict, done.stderr)
        assert "refused: [Errno" in done.stderr, done.stderr
    unconfined = "without OS confinement" in done.stderr
    assert unconfined is no_userns, done.stderr
