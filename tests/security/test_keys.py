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

from tests.security.frontends import ACP_FRAMES, ANSWER, needs
from tests.security.scenarios import RUN_TIMEOUT_S, Run
from tests.security.world import encoded_forms, iter_leaks, session_bytes

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
    for name, key in probe.world.keys.items():
        for form in encoded_forms(key):
            assert form not in everything, f"{name} left encoded"


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
