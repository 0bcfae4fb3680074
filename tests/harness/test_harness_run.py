"""`jev-harness run` end to end: real CLI, real harness and router workers, loopback Jev."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import JEV_KEY, SCRIPTS, HarnessCli

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def test_a_run_completes_with_every_decision_recorded(cli: HarnessCli) -> None:
    cli.jev.script([{"items.pick.item": "a"}, {"tool": "items.pick"}, {"items.pick.item": "b"}])
    out = cli.run(PICK, "pick b", INPUTS)
    assert out.code == 0, out.stderr
    result = out.result
    assert result["status"] == "completed" and "artifact" in result
    events = cli.events(result["session_id"])
    assert [e["kind"] for e in events][:4] == ["session", "user", "task", "run_started"]
    assert events[0]["data"]["created_by"] == "jev-harness"
    assert [e for e in out.lines if e["seq"] is not None] == events  # stdout = the log, then result
    task = events[2]["data"]
    assert task["sha256"] and task["tools"] == ["items.pick", "items.note"]
    routes = out.of("route")
    assert routes[0]["method"] == "single_option" and routes[0]["question"] == "tool"
    assert routes[1]["method"] == "jev" and routes[1]["accepted"] and routes[1]["top"] == 0.9
    params = out.of("parameter")
    assert [p["choice"] for p in params] == ["a", "b"]
    assert all(p["question"] == "items.pick.item" and p["selection"] == "explore" for p in params)
    questions = [list(b["questions"]) for b in cli.jev.systemone_bodies()]
    assert questions == [["items.pick.item"], ["tool"], ["items.pick.item"]]
    for body in cli.jev.systemone_bodies():
        assert len(body["state"].encode()) <= 8192
    started = out.of("tool_started")
    assert len(started) == 2 == len(out.of("tool_finished"))
    assert out.kinds()[-2:] == ["final", "result"]
    assert JEV_KEY not in out.stdout + out.stderr


def test_below_threshold_pauses_with_the_top_options(cli: HarnessCli) -> None:
    cli.jev.script([{"items.pick.item": {"a": 0.29, "b": 0.28, "c": 0.43}}])  # explore: ok
    cli.jev.script([{"tool": {"items.pick": 0.5, "items.note": 0.5}}])  # match: refused
    out = cli.run(PICK, "pick b", INPUTS)
    assert out.code == 2
    assert out.result["status"] == "needs_input"
    assert "tool" in out.result["summary"] and "items.pick 0.50" in out.result["summary"]
    assert out.of("route")[-1]["accepted"] is False
    assert len(out.of("tool_started")) == 1  # nothing executed for the refused decision


def test_max_steps_blocks(cli: HarnessCli) -> None:
    cli.jev.script([{"items.pick.item": "a"}, {"tool": "items.note"}])
    out = cli.run(PICK, "pick b", INPUTS, "--max-steps", "2")
    assert out.code == 2 and out.result["status"] == "blocked"
    assert "max steps" in out.result["summary"]
    assert len(out.of("tool_started")) == 2


def test_missing_key_is_named_before_any_session(cli: HarnessCli) -> None:
    out = cli.run(PICK, "pick b", INPUTS, key=False)
    assert out.code == 2 and "TYPESAFE_API_KEY" in out.stderr
    assert out.result["status"] == "error"
    assert not cli.home.exists() or not any(cli.home.iterdir())


def test_bad_inputs_json_is_named(cli: HarnessCli) -> None:
    out = cli.run(PICK, "pick b", "{not json")
    assert out.code == 2 and "--inputs is not valid JSON" in out.stderr
    assert not cli.home.exists()


def test_a_build_that_raises_is_reported_with_its_traceback(cli: HarnessCli) -> None:
    out = cli.run(PICK, "pick b", {**INPUTS, "fail_build": True})
    assert out.code == 2
    assert "ValueError: this build fails on purpose" in out.stderr
    assert "pick_task.py" in out.stderr and "in build" in out.stderr
    assert not cli.home.exists() or not any(cli.home.iterdir())


def test_jmp_refuses_a_harness_session_naming_inspect(cli: HarnessCli) -> None:
    import subprocess
    import sys

    from tests.harness.helpers import ROOT

    cli.jev.script([{"items.pick.item": "b"}])
    sid = cli.run(PICK, "pick b", INPUTS).result["session_id"]
    argv = [
        sys.executable,
        str(ROOT / "main.py"),
        "--json",
        "--session",
        sid,
        "--sessions-dir",
        str(cli.home),
    ]
    done = subprocess.run(argv, env=cli.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "jev-harness inspect" in done.stderr
    listing = subprocess.run(
        [
            sys.executable,
            str(ROOT / "main.py"),
            "--json",
            "--list",
            "--sessions-dir",
            str(cli.home),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sid in listing.stdout
    report = cli.inspect(sid)
    assert report.code == 0 and report.lines[0]["status"] == "completed"


def test_a_domain_over_255_options_is_paged(cli: HarnessCli) -> None:
    items = [f"i{n}" for n in range(300)]
    cli.jev.script([{"items.pick.item.page": "page2"}, {"items.pick.item": "i299"}])
    out = cli.run(PICK, "pick i299", {"items": items, "target": "i299"})
    assert out.code == 0, out.stderr[-2000:]
    bodies = cli.jev.systemone_bodies()
    page_q = bodies[0]["questions"]["items.pick.item.page"]
    assert list(page_q["criteria"]) == ["page1", "page2"]
    assert "i0" in page_q["criteria"]["page1"] and "i254" in page_q["criteria"]["page1"]
    item_q = bodies[1]["questions"]["items.pick.item"]
    assert list(item_q["criteria"]) == items[255:]  # the chosen page, whole, in order
    page, item = out.of("parameter")
    assert page["question"] == "items.pick.item.page" and page["selection"] == "explore"
    assert page["choice"] == "page2" and page["domain"] == 300 and page["offered"] == 2
    assert item["choice"] == "i299" and item["offered"] == 45 and item["domain"] == 300


def test_what_the_harness_worker_prints_is_redacted(cli: HarnessCli) -> None:
    """The worker holds no key (issue 20 item 4: not even CAMOFOX_ACCESS_KEY in its
    environment), but what it prints of a key it read somewhere is redacted."""
    secret = "camofox-access-key-0123456789abcdef"
    cli.extra_env["CAMOFOX_ACCESS_KEY"] = secret
    (cli.cwd / "found.txt").write_text(secret)
    cli.jev.script([{"items.pick.item": "b"}])
    out = cli.run(PICK, "pick b", {**INPUTS, "print_env": str(cli.cwd / "found.txt")})
    assert out.code == 0, out.stderr[-2000:]
    assert out.stderr.count("camofox key: None") == 2
    assert out.stderr.count("the file says: [REDACTED]") == 2
    assert secret not in out.stdout + out.stderr
    for path in cli.home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


def test_a_fifo_as_the_script_and_a_hanging_build_end_with_exit_2(cli: HarnessCli) -> None:
    import os

    fifo = cli.tmp / "script.py"
    os.mkfifo(fifo)
    out = cli.run(fifo, "pick b", INPUTS)
    assert out.code == 2 and "not a regular file" in out.stderr
    hung = cli.run(PICK, "pick b", {**INPUTS, "hang_build": True}, "--timeout", "1")
    assert hung.code == 2 and "task script" in hung.stderr
    assert hung.result["status"] == "error"
    assert not cli.home.exists() or not any(cli.home.iterdir())


def test_the_readable_view_ends_with_the_sessions_dir_and_the_next_command(
    cli: HarnessCli,
) -> None:
    """Issue 37: as jmp's view does, `jev-harness run` without --json ends saying where the
    session is kept and the command that shows it, which then works as printed."""
    import shlex

    cli.jev.script([{"items.pick.item": "a"}, {"tool": "items.pick"}, {"items.pick.item": "b"}])
    argv = [a for a in cli.run_argv(PICK, "pick b", INPUTS) if a != "--json"]
    done = subprocess.run(argv, cwd=cli.cwd, env=cli.env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    status, step = done.stdout.splitlines()[-2:]
    assert status.startswith("[completed] session ") and status.endswith(f" · kept in {cli.home}")
    assert step.startswith("  see it: jev-harness inspect --sessions-dir "), step
    words = shlex.split(step.removeprefix("  see it: "))
    shown = subprocess.run(cli.argv(*words[1:]), cwd=cli.cwd, env=cli.env(), capture_output=True)
    assert shown.returncode == 0, shown.stderr
