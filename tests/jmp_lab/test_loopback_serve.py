"""`jmp-demo --serve` (issue 37): the loopback models for a task the user types, without keys.
It prints an `export` line that works as pasted, answers from an answers file the user edits
while it runs (re-read on change), else by its echo policy, and serves until Ctrl+C."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from jmp_lab.loopback import STARTER
from tests.support.cli import ROOT

BIN = Path(sys.executable).parent


def _line_with(out: IO[str], text: str) -> str:
    """Read the server's stdout until a line holding `text` (bounded by its lines, not time)."""
    for line in out:
        if text in line:
            return line
    raise AssertionError(f"the server ended before printing {text!r}")


def _env_of(export: str, base: dict[str, str]) -> dict[str, str]:
    words = shlex.split(export)
    assert words[0] == "export"
    return base | dict(word.split("=", 1) for word in words[1:])


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_serve_answers_a_typed_task_from_its_echo_policy_then_from_the_edited_file(
    short_tmp: Path,
) -> None:
    answers = short_tmp / "answers.json"
    workspace = short_tmp / "mine"
    workspace.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))}
    base |= {k: os.environ[k] for k in ("JMP_WARM", "JMP_WARM_DIR") if k in os.environ}
    base |= {"JMP_SESSIONS_DIR": str(short_tmp / "sessions")}
    with subprocess.Popen(
        [str(BIN / "jmp-demo"), "--serve", "--jev-port", "0", "--flash-port", "0",
         "--answers", str(answers)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=short_tmp,
        env=base | {"PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
    ) as server:  # fmt: skip
        try:
            assert _the_user_types_tasks(server, answers, workspace, base) == 0
        finally:
            if server.poll() is None:
                server.kill()


def _the_user_types_tasks(
    server: subprocess.Popen[str], answers: Path, workspace: Path, base: dict[str, str]
) -> int:
    """The tasks typed against the serving demo, then Ctrl+C; the server's exit status."""
    assert server.stdout is not None
    assert "wrote a starter answers file" in _line_with(server.stdout, "starter")
    assert json.loads(answers.read_text()) == STARTER
    env = _env_of(_line_with(server.stdout, "export "), base)
    _line_with(server.stdout, "until Ctrl+C")

    def jmp(task: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "main.py"), "--no-mcp", task], cwd=workspace,
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    out = jmp("tidy up my notes")
    assert "▶ bash ls -la" in out and "[completed] session" in out, out
    assert "You asked: “tidy up my notes”" in out and str(answers) in out

    answers.write_text(json.dumps(STARTER["example"]))  # the user edits it while it runs
    assert "3 Jev step(s), 2 Flash reply(ies) queued" in _line_with(server.stdout, "queued")
    out = jmp("write hello.py")
    assert (workspace / "hello.py").read_text() == "print('hello')\n"
    assert "Wrote hello.py (a scripted answer)." in out
    server.send_signal(signal.SIGINT)  # Ctrl+C
    assert "stopped" in _line_with(server.stdout, "stopped")
    return server.wait(timeout=60)


def test_serve_refuses_an_answers_file_that_is_not_one(short_tmp: Path) -> None:
    answers = short_tmp / "answers.json"
    answers.write_text('{"jev": "route"}')
    done = subprocess.run(
        [str(BIN / "jmp-demo"), "--serve", "--jev-port", "0", "--flash-port", "0",
         "--answers", str(answers)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2 and '"jev" must be a list of steps' in done.stderr, done
