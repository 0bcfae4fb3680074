"""The key file's keys are secrets like the environment's (issue 34 item 1), on every path and
every front end that reads the file (KEY_FILE: jmp, jmp --acp, jev-harness, jev-harness-mcp).

The `keyfile` run (scenarios.py) sets no model key variable: TYPESAFE_API_KEY and FLASH_API_KEY
are in the key file alone, as `jmp --setup` leaves it. The run must reach its models with them
(through the pool's environment pipe on the warm path), and they must reach nothing else: not
the client, stderr, a model request body, the session's files, the untrusted code's environment
or any environment it can read. The untrusted code (same user) can read the owner's file, as it
can the workspace's `.env`: it prints the keys encoded, and the redactor knows those forms too.
Another user (uid 65534, no capability) can neither list the directory nor read the file.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest

from tests.security.frontends import KEY_FILE, SHELL, needs
from tests.security.scenarios import RUN_TIMEOUT_S, Run
from tests.security.world import KEY_NAMES, encoded_leaks, iter_leaks, session_bytes

pytestmark = [pytest.mark.timeout(RUN_TIMEOUT_S + 120), needs(KEY_FILE)]

STORED = ("TYPESAFE_API_KEY", "FLASH_API_KEY")


def _stored(run: Run) -> dict[str, str]:
    return {name: run.world.keys[name] for name in STORED}


def test_the_run_reached_its_models_with_the_files_keys(keyfile: Run) -> None:
    """No key variable was set: a completed run with these bearer keys read the file."""
    assert keyfile.events and keyfile.events[-1]["kind"] == "final", keyfile.outcome.stderr[-3000:]
    assert keyfile.events[-1]["data"]["status"] == "completed", keyfile.outcome.stderr[-3000:]
    jev = {r["headers"].get("Authorization") for r in keyfile.world.jev.requests}
    assert jev == {f"Bearer {keyfile.world.keys['TYPESAFE_API_KEY']}"}
    if keyfile.cell.fe.family == "agent":  # the harness family asks no Flash
        flash = {r["headers"].get("Authorization") for r in keyfile.world.flash.requests}
        assert flash == {f"Bearer {keyfile.world.keys['FLASH_API_KEY']}"}


def test_no_file_key_leaves_raw_or_encoded(keyfile: Run) -> None:
    outcome = keyfile.outcome
    everything = outcome.output + outcome.stderr + json.dumps(keyfile.requests(), default=str)
    stored = session_bytes(keyfile.world.home).decode("utf-8", "replace")
    assert "ENC TYPESAFE_API_KEY" in stored, "the file's keys were never printed: proves nothing"
    everything += stored
    assert not list(iter_leaks(everything, keyfile.world.secrets()))
    assert "DUMP base64" in stored, "the key file was never printed wrapped: proves nothing"
    leaks = encoded_leaks(everything, _stored(keyfile))
    assert not leaks, f"{leaks}: the key file's keys left encoded"


def test_no_file_key_in_any_environment_the_untrusted_code_reads(keyfile: Run) -> None:
    """Its own (no key variable at all) and every /proc/PID/environ it could read: the
    kernel's, whose environment took the file's keys, and the model workers' are unreadable."""
    report = keyfile.world.probe_report()
    for name in KEY_NAMES:
        assert name not in report["env"], f"{name} is in the untrusted code's environment"
    dump = keyfile.world.environ_dump()
    for name, key in _stored(keyfile).items():
        assert key.encode() not in dump, f"the untrusted code read {name} of the key file"
    assert keyfile.kernel_pid not in report["environ_readable_pids"]


@needs(SHELL, KEY_FILE)  # (a row's own marker replaces the module's)
def test_the_shells_output_of_the_file_reaches_the_models_redacted(keyfile: Run) -> None:
    """The shell printed the file's keys encoded; Flash read that output, redacted."""
    bodies = json.dumps([r["body"] for r in keyfile.world.flash.requests], default=str)
    assert "ENC FLASH_API_KEY" in bodies, "Flash never saw the printout: proves nothing"
    for name, key in _stored(keyfile).items():
        assert key not in bodies, name
    leaks = encoded_leaks(bodies, _stored(keyfile))
    assert not leaks, f"{leaks} reached Flash"


def test_the_key_file_stays_its_owners_alone(keyfile: Run) -> None:
    path = keyfile.world.env_file
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["keys"] == _stored(keyfile)  # the run changed nothing
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed"
    os.chmod(keyfile.world.tmp, 0o755)  # only the key dir's and file's own modes guard now
    os.chmod(path.parent.parent, 0o755)
    nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    if os.geteuid() == 0:
        nobody += ["--bounding-set=-all", "--inh-caps=-all"]
    for argv in (["cat", str(path)], ["ls", str(path.parent)]):
        done = subprocess.run([*nobody, "--", *argv], capture_output=True, text=True)
        assert done.returncode != 0 and "Permission denied" in done.stderr, (argv, done)
