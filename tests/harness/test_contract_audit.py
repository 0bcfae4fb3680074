"""Black-box checks of HARNESS.md statements that the other harness tests leave implicit."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jmp_lab.servers.jev import JevServer
from jmp_lab.servers.site import MARKER, SiteServer
from tests.harness.helpers import JEV_KEY, ROOT, SCRIPTS, HarnessCli
from tests.support.cli import json_lines
from tests.support.warm import tree_of
from tests.support.workers import wait_until

PICK = SCRIPTS / "pick_task.py"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def test_the_task_record_names_limits_and_redacts_inputs(cli: HarnessCli) -> None:
    """HARNESS.md 5: `task` carries script path and sha256, redacted inputs, limits, toolkits,
    labels and output."""
    cli.jev.script([{"items.pick.item": "a"}, {"tool": "items.pick"}, {"items.pick.item": "b"}])
    inputs = {"items": ["a", "b", "c"], "target": "b", "note": f"key {JEV_KEY}"}
    out = cli.run(PICK, "pick b", inputs, "--max-steps", "7", "--timeout", "90")
    assert out.code == 0, out.stderr
    task = out.of("task")[0]
    assert task["script"] == str(PICK) and len(task["sha256"]) == 64
    assert task["limits"] == {"max_steps": 7, "timeout_s": 90.0}
    assert JEV_KEY not in str(task["inputs"]) and task["inputs"]["target"] == "b"
    assert {"toolkits", "labels", "output"} <= set(task)


def test_check_task_writes_nothing_and_lists_the_built_tools(cli: HarnessCli) -> None:
    """HARNESS.md 6: static, no file written (bytecode caches included), keys ok/problems/..."""
    script = cli.cwd / "workspace_task.py"
    script.write_bytes((ROOT / "examples" / "workspace_task.py").read_bytes())
    inputs = '{"root": ".", "queries": ["x"], "markers": ["m"], "output": "o.json"}'
    argv = cli.argv("check-task", str(script), "--inputs", inputs, "--json")
    out = cli.call(argv, key=False, envelope=False)
    assert out.code == 0, out.stderr
    (shown,) = out.lines
    assert set(shown) == {"ok", "problems", "tools", "labels"} and shown["ok"] is True
    assert "save_report" in {t["name"] for t in shown["tools"]} and shown["labels"] == ["m"]
    assert sorted(p.name for p in cli.cwd.iterdir()) == ["workspace_task.py"]
    assert not cli.home.exists()


def test_max_steps_does_not_count_the_entry_capture(cli: HarnessCli) -> None:
    """HARNESS.md 6: `--max-steps` counts executed operations, the entry capture not counted;
    HARNESS.md 5: the entry capture is itself a tool_started / tool_finished pair."""
    with SiteServer() as site:
        cli.jev.script([{"tool": "web.open_link"}, {"web.open_link.link": "marker"}])
        inputs = {
            "url": site.url + "/",
            "allowed_origins": [site.url],
            "markers": [MARKER],
            "output": "report.json",
        }
        out = cli.run(ROOT / "examples" / "research_task.py", "find it", inputs, "--max-steps", "1")
        assert out.code == 2, out.stderr[-2000:]
        assert out.result["status"] == "blocked" and "max steps" in out.result["summary"]
        assert len(out.of("tool_started")) == 2 == len(out.of("tool_finished"))  # entry + one
        assert site.count("/") == 1 and site.count("/marker") == 1


def test_a_second_ctrl_c_mid_call_settles_the_call_before_final(cli: HarnessCli) -> None:
    """CONTRACT.md 6 / HARNESS.md 5: a call interrupted by stopping its worker is
    `tool_uncertain` at once; no `final` is written over a pending call, no process is left."""
    hold = cli.tmp / "hold"
    os.mkfifo(hold)
    inputs = {"items": ["a"], "target": "a", "hold": str(hold), "hold_item": "a"}
    argv = cli.run_argv(PICK, "pick a", inputs)
    with (cli.tmp / "err.txt").open("w+") as err:
        proc = subprocess.Popen(
            argv, cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE, stderr=err, text=True
        )
        started = Path(f"{hold}.started")
        wait_until(lambda: started.exists() and started.read_text(), 60, "the held call")
        family = [proc.pid, *tree_of(proc.pid)]
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: "Ctrl+C again" in Path(err.name).read_text(), 60, "the first Ctrl+C")
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    session_id = json_lines(stdout)[-1]["data"]["session_id"]
    events = cli.events(session_id)
    assert [e["kind"] for e in events][-3:] == ["tool_started", "tool_uncertain", "final"]
    assert events[-2]["data"]["call_id"] == events[-3]["data"]["call_id"]
    assert events[-1]["data"]["status"] == "cancelled"
    wait_until(lambda: not any(psutil.pid_exists(p) for p in family), 30, "every process to exit")
    assert cli.inspect(session_id).code == 0 and len(cli.events(session_id)) == len(events)
