"""Keys never leave (issue 9 items 2, 3, 13; issue 20 items 5, 7), on every path and front end.

The probe run (scenarios.py) sets all four keys (each set key is a secret, used or not), puts
them in the prompt or goal and in the model's answer, and configures an MCP server with a
secret argument, a secret env value and a model key as a careless plain argument. None of
those values, raw or encoded, may reach what the client received, the front end's stderr, a
model request body or the session's files.
"""

from __future__ import annotations

import json

import pytest

from tests.security.frontends import ACP_FRAMES, ANSWER, SHELL, needs
from tests.security.scenarios import RUN_TIMEOUT_S, Run
from tests.security.world import encoded_leaks, iter_leaks, session_bytes, sqlite_text

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def test_the_run_completed(probe: Run) -> None:
    """Every other row of the probe run reads a run that really happened."""
    outcome = probe.outcome
    assert probe.events and probe.events[-1]["kind"] == "final", outcome.stderr[-3000:]
    assert probe.events[-1]["data"]["status"] == "completed", outcome.stderr[-3000:]
    assert outcome.reported in ("completed", "end_turn"), outcome.reported


def test_no_key_in_what_the_client_received(probe: Run) -> None:
    leaks = list(iter_leaks(probe.outcome.output, probe.world.secrets()))
    assert not leaks, f"{leaks} reached the client"


def test_no_key_on_the_front_ends_stderr(probe: Run) -> None:
    leaks = list(iter_leaks(probe.outcome.stderr, probe.world.secrets()))
    assert not leaks, f"{leaks} reached stderr"


def test_no_key_in_a_model_request_body(probe: Run) -> None:
    bodies = json.dumps(probe.requests(), default=str)
    assert probe.requests(), "no model was asked: the row proves nothing"
    leaks = list(iter_leaks(bodies, probe.world.secrets()))
    assert not leaks, f"{leaks} reached a model"


def test_no_key_in_the_session_files(probe: Run) -> None:
    stored = session_bytes(probe.world.home).decode("utf-8", "replace")
    assert stored, "no session was stored"
    leaks = list(iter_leaks(stored, probe.world.secrets()))
    assert not leaks, f"{leaks} stored in the sessions dir"


def test_no_encoded_key_leaves(probe: Run) -> None:
    """The shell could print a key hex- or base64-encoded, past any redactor: it must hold
    none to print (the probe prints every environment of this run it could read, encoded)."""
    everything = probe.outcome.output + probe.outcome.stderr
    everything += json.dumps(probe.requests(), default=str)
    everything += session_bytes(probe.world.home).decode("utf-8", "replace")
    leaks = encoded_leaks(everything, probe.world.keys)
    assert not leaks, f"{leaks} left encoded"


# The untrusted code also prints every key it read from the workspace's `.env` in its common
# encodings (probe.py `ENC` lines: base64 in three alignments and two alphabets, hex, percent;
# issue 32 item 6), and before them the whole file line-wrapped through GNU `base64` and
# `xxd -p` (`DUMP` lines: each key broken across lines wherever the file puts it). The redactor
# knows the raw keys, so it must know those forms too, in every place the raw keys are kept out
# of. Each row first finds the printout there (or says why it cannot be), so that it proves
# something, then decodes what is there (world.encoded_leaks: every base64 and hex alignment,
# line breaks and all other text dropped), not a list of the forms the redactor knows.

PRINTOUT = ("DUMP base64", "DUMP xxd -p", "ENC TYPESAFE_API_KEY")


def _printed(text: str, where: str) -> None:
    missing = [line for line in PRINTOUT if line not in text]
    assert not missing, f"{missing} not in {where}: the row proves nothing"


def _stored(probe: Run, pattern: str) -> str:
    files = sorted(p for p in probe.world.home.rglob(pattern) if p.is_file())
    assert files, f"no {pattern} under the sessions dir"
    return b"".join(p.read_bytes() for p in files).decode("utf-8", "replace")


def test_no_encoded_key_in_the_event_log(probe: Run) -> None:
    log = _stored(probe, "events.jsonl")
    # (a task's outcome text in the log is its first 1,200 characters: the dumps, then the
    # first key's lines)
    _printed(log, "the log")
    leaks = encoded_leaks(log, probe.world.keys)
    assert not leaks, f"{leaks} in events.jsonl"


@needs(SHELL)
def test_no_encoded_key_in_the_recall_index(probe: Run) -> None:
    """(A jev-harness session keeps no recall index.) Read through SQLite, which splits a long
    text across pages in the file, and as the raw files too."""
    files = sorted(p for p in probe.world.home.rglob("memory.sqlite3") if p.is_file())
    assert files, "no memory.sqlite3 under the sessions dir"
    index = "\n".join(sqlite_text(path) for path in files)
    _printed(index, "the recall index")
    leaks = encoded_leaks(index, probe.world.keys)
    leaks += encoded_leaks(_stored(probe, "memory.sqlite3*"), probe.world.keys)
    assert not leaks, f"{leaks} in memory.sqlite3"


def test_no_encoded_key_in_the_artifacts(probe: Run) -> None:
    stored = _stored(probe, "artifacts/**/*")
    _printed(stored, "any artifact")
    leaks = encoded_leaks(stored, probe.world.keys)
    assert not leaks, f"{leaks} in the artifacts"


def test_no_encoded_key_in_what_the_client_received(probe: Run) -> None:
    leaks = encoded_leaks(probe.outcome.output, probe.world.keys)
    assert not leaks, f"{leaks} reached the client"


@needs(SHELL)
def test_no_encoded_key_in_a_jev_request(probe: Run) -> None:
    """Jev routes the step after the shell's (a harness task's one operation is chosen before
    it runs, and the task then completes: its Jev never reads an outcome)."""
    bodies = json.dumps([r["body"] for r in probe.world.jev.requests], default=str)
    _printed(bodies, "a Jev request")
    leaks = encoded_leaks(bodies, probe.world.keys)
    assert not leaks, f"{leaks} reached Jev"


@needs(SHELL)
def test_no_encoded_key_in_a_flash_request(probe: Run) -> None:
    """Flash writes the shell command and reads its output (the harness family asks no
    Flash)."""
    bodies = json.dumps([r["body"] for r in probe.world.flash.requests], default=str)
    _printed(bodies, "a Flash request")
    leaks = encoded_leaks(bodies, probe.world.keys)
    assert not leaks, f"{leaks} reached Flash"


@needs(ANSWER)
def test_the_answer_reaches_the_client_redacted(probe: Run) -> None:
    """The model's answer held every key: the client sees it with each key replaced, not
    dropped (the readable view's handling of its escapes is test_view.py's)."""
    answer = probe.outcome.answer
    assert "Looked around." in answer, answer
    assert answer.count("[REDACTED]") >= len(probe.world.keys), answer


@needs(ACP_FRAMES)
def test_redaction_leaves_every_frame_the_protocol(probe: Run) -> None:
    """The keys were in the prompt, the shell's output and the answer, and were redacted in the
    frames: every frame kept its keys and validates as ACP, on both paths. (Issue 20 item 7's
    own probe, secrets that spell protocol words and one client's secrets in another session,
    is tests/acp/test_acp_framing.py: it does not depend on the spawn path.)"""
    from tests.acp.helpers import check_acp_frame

    frames = probe.outcome.items
    assert any(f.get("method") == "session/update" for f in frames), "no update: proves nothing"
    for frame in frames:
        check_acp_frame(frame)
    assert "[REDACTED]" in probe.outcome.output
