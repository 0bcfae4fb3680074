"""A silent command's heartbeat in `jmp --json` (issue 34 item 2): transient `tool_progress`
lines (`seq: null`) while the tool runs, with its elapsed time, that never reach the log, its
seq order or a model's context."""

from __future__ import annotations

import pytest

from kernel.config.settings import heartbeat_s
from kernel.errors import ConfigError
from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)

SILENT = {"tool_call": {"arguments": {"command": "sleep 5; echo woke"}}}


def test_a_silent_command_beats_in_the_json_stream_and_nowhere_else(jmp: Cli) -> None:
    jmp.extra_env["JMP_HEARTBEAT_S"] = "1"  # 10 by default; a shorter beat keeps the test short
    jmp.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([SILENT, {"text": "It woke."}])
    out = jmp.task("wait, then say so", timeout=240)
    assert out.code == 0, out.stderr
    kinds = out.kinds()
    beats = [line for line in out.lines if line["kind"] == "tool_progress"]
    assert len(beats) >= 2, kinds  # 5 s at one beat a second
    assert all(line["seq"] is None for line in beats)
    started = kinds.index("tool_started")
    finished = kinds.index("tool_finished")
    assert all(started < out.lines.index(b) < finished for b in beats)
    elapsed = [b["data"]["elapsed_s"] for b in beats]
    assert elapsed == sorted(elapsed) and elapsed[0] < elapsed[-1]
    (call,) = out.of("tool_started")
    assert {(b["data"]["call_id"], b["data"]["tool"]) for b in beats} == {(call["call_id"], "bash")}
    persisted = [line for line in out.lines if line["seq"] is not None]
    assert [line["seq"] for line in persisted] == list(range(1, len(persisted) + 1))
    log = jmp.log(out.result["session_id"])
    assert "tool_progress" not in {e["kind"] for e in log}
    for body in jmp.flash.completions():
        assert "tool_progress" not in str(body["messages"])


def test_the_heartbeat_interval_is_checked() -> None:
    assert heartbeat_s({}) == 10.0
    assert heartbeat_s({"JMP_HEARTBEAT_S": "0.5"}) == 0.5
    for bad in ("0", "-1", "soon", "11"):
        with pytest.raises(ConfigError, match="JMP_HEARTBEAT_S"):
            heartbeat_s({"JMP_HEARTBEAT_S": bad})
