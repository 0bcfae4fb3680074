"""The chaos runner: its plans are reproducible, its checks can fail, and a short campaign of
real kills against the real CLI finds nothing violated; a short campaign of power cuts finds
nothing violated either."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from jmp_lab.chaos import check
from jmp_lab.chaos.__main__ import campaign, lane_of, reproduce, summed, table
from jmp_lab.chaos.invoke import Delivered, Outcome
from jmp_lab.chaos.plan import (
    LOG,
    PHASES,
    Cut,
    IterationPlan,
    Kill,
    aimed,
    make_plan,
    make_quick_plan,
    parse_cut,
)
from jmp_lab.chaos.power import unclear
from jmp_lab.chaos.powercut.control import available
from jmp_lab.chaos.targets import TARGETS, WORKERS


def test_the_same_seed_gives_the_same_plan_and_another_seed_another() -> None:
    assert make_plan(7, 3) == make_plan(7, 3)
    assert make_plan(7, 3) != make_plan(8, 3)
    assert make_plan(7, 3) != make_plan(7, 4)
    plans = [make_plan(1, i) for i in range(60)]
    kills = [k for p in plans for k in p.kills]
    assert {k.target for k in kills} == set(TARGETS)
    assert {k.phase for k in kills} == set(PHASES)
    tokens = [s.token for p in plans for s in p.steps()]
    assert len(tokens) == len(set(tokens))


def test_every_worker_kind_is_a_kill_target() -> None:
    assert set(WORKERS) >= {"router", "generator", "tool", "mcp"}
    assert WORKERS["tool"](["python", "-m", "workers.tool", "ipc:///x"])
    assert not WORKERS["tool"](["python", "-m", "workers.toolbox"])


def _log(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def _event(seq: int, kind: str, **data: object) -> dict:
    return {
        "version": 1,
        "session_id": "s",
        "seq": seq,
        "time": 1.0 + seq,
        "kind": kind,
        "data": data,
    }


def test_the_checks_catch_a_broken_log_a_rerun_and_a_lost_end(tmp_path: Path) -> None:
    plan = make_plan(1, 0)
    step = plan.steps()[0]
    events = [
        _event(1, "session", session_id="s"),
        _event(2, "tool_started", call_id="c1", tool=step.tool, arguments=step.token),
        _event(4, "user", text="x"),
    ]
    log = _log(tmp_path / "events.jsonl", events)
    with log.open("ab") as out:
        out.write(b'{"version": 1, "se')
    parsed, problems = check.strict_log(log)
    assert any("seq 4" in p for p in problems) and any("torn" in p for p in problems)
    figures: Counter[str] = Counter()
    assert check.call_ends(parsed, figures) == ["call c1: tool_started and no end after reopening"]
    assert check.interrupted(parsed) == {"c1"}
    (tmp_path / "witness.log").write_text(f"{step.token} 5.0\n{step.token} 6.0\nW-unknown 7.0\n")
    found = check.witnesses(plan, parsed, tmp_path, figures)
    assert f"{step.token}: ran 2 times" in found
    assert "W-unknown: effect in witness.log without its tool_started" in found
    assert figures["re-executions"] == 1
    (tmp_path / "leak.txt").write_text(plan.keys["flash"])
    assert check.leaks(plan, [tmp_path], [], figures)
    assert check.torn_archives(log, [b'{"version": 1, "se'], parsed)


def test_the_report_names_the_command_that_reproduces_an_iteration() -> None:
    assert reproduce(5, 9, "jmp --x") == (
        "python -m jmp_lab.chaos --seed 5 --first 9 --iterations 1 --keep --jmp 'jmp --x'"
    )
    assert reproduce(5, 9, None, power=True).endswith("--keep --power only")
    aim = "phase=event,kind=user,nth=2"
    assert reproduce(5, 9, None, power=True, model="name", aim=aim).endswith(
        f"--power only --model name --aim {aim}"
    )
    assert parse_cut(aim + ",seed=3") == Cut("event", 2, kind="user", seed=3)
    shown = table(Counter(kills=3, cuts=2, **{"violations: recall-stale": 1}), 60.0)
    assert "wall time" in shown and "cuts per minute           2.0" in shown
    assert shown.index("violations: recall-stale") > shown.index("cuts")


def test_the_power_mode_says_why_it_cannot_run_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import jmp_lab.chaos.__main__ as runner

    monkeypatch.setattr(runner, "available", lambda: "no /dev/fuse: this kernel offers no FUSE")
    assert runner.main(["--power", "mix", "--iterations", "1"]) == 2
    assert "power cuts cannot run here: no /dev/fuse" in capsys.readouterr().err


def test_power_plans_cut_on_every_model_and_leave_kill_plans_as_they_were() -> None:
    plans = [make_plan(1, i, power=True) for i in range(30)]
    assert {p.power for p in plans} == {"strict", "name", "journal"}
    cuts = [k for p in plans for k in p.kills if isinstance(k, Cut)]
    assert {c.phase for c in cuts} >= {"event", "fs", "random", "route", "tool"}
    assert {(c.data, c.dirs) for c in cuts} >= {("lose", "lose"), ("torn-byte", "subset")}
    assert make_plan(1, 3).kills == make_plan(1, 3, power=False).kills
    assert make_plan(1, 3).requests == make_plan(1, 3, power=True).requests


def test_quick_plans_aim_at_moments_an_iteration_reaches_on_both_paths_and_every_model() -> None:
    plans = [make_quick_plan(1, i, power=i % 2 == 1) for i in range(60)]
    assert make_quick_plan(4, 9, True) == make_quick_plan(4, 9, True) != make_quick_plan(5, 9, True)
    assert {p.warm for p in plans} == {True, False}
    assert {p.power for p in plans[1::2]} == {"strict", "name", "journal"}
    assert all(len(p.steps()) <= 6 and 5 <= len(p.kills) <= 9 for p in plans[::2] if p.warm)
    assert all(len(p.kills) <= 3 for p in plans if not p.warm)  # each run after one is cold
    kills = [k for p in plans for k in p.kills if isinstance(k, Kill)]
    assert {k.target for k in kills} == set(TARGETS)
    assert all(k.nth <= (3 if k.phase == "between" else 1) for k in kills)  # held up by none
    # most worlds have no MCP server (world.py: only where a call or a kill needs it)
    served = [
        p
        for p in plans
        if any(s.tool == "mcp.witness" for s in p.steps())
        or any(k.target == "mcp" for k in p.kills)
    ]
    assert 0 < len(served) < len(plans) * 0.6
    for plan in plans:  # a tool phase only where a call leaves a witness line
        witnessed = any(s.tool in ("bash", "mcp.witness") for s in plan.requests[0])
        assert witnessed or all(k.phase != "tool" for k in plan.kills)
    cuts = [c for p in plans[1::2] for c in p.kills if isinstance(c, Cut)]
    assert len(cuts) >= 2 * len(plans[1::2])
    assert all(c.kind not in ("session", "user", "final") for c in cuts if c.phase == "event")
    assert all("context" not in c.pattern for c in cuts)  # a quick session never compacts
    # the quick plan of a kill iteration is the same whether or not its lane runs power too
    assert make_quick_plan(1, 4) == make_quick_plan(1, 4, power=False)


def test_a_disk_error_must_be_told_unless_the_kernel_was_killed_first() -> None:
    """The 7-minute campaign's `eio-unclear` (seed 1, iteration 3): a kernel killed at a
    generation's first chunk, milliseconds after the failed fsync of the record before it,
    had nobody left to tell it (as after a cut); a run that lives on and says nothing is
    still a violation, and one that names the failure and the file is not."""
    fired = {"rules": [{"action": "eio", "fired": [{"op": "fsync", "path": "/s/events.jsonl"}]}]}
    route = '{"seq": 6, "kind": "route"}\n'
    killed = Outcome([], code=-9, stdout=route, disk=fired)
    killed.kills.append(Delivered("kernel", "generate", 1))
    assert unclear(killed, "eio_fsync", "/home") is None
    quiet = Outcome([], code=0, stdout=route, disk=fired)
    assert (unclear(quiet, "eio_fsync", "/home") or "").startswith("eio-unclear: fsync of /s/")
    said = Outcome([], code=2, stderr="jmp: /home/s/events.jsonl: Input/output error", disk=fired)
    assert unclear(said, "eio_fsync", "/home") is None


def test_a_failed_directory_sync_for_the_recall_cache_alone_need_not_be_told() -> None:
    """The third session's hour, iteration 59 (journal model): EIO on an fsync of the session
    directory, and the run went on and completed. SQLite syncs the directory of a new WAL and
    ignores that error, and events.index's writer drops the index on any error; the entries
    it was to commit were such caches' (or none, the journal having committed them), which
    jmp rebuilds from the log. One of jmp's own entries pending
    there makes it a violation again."""
    route = '{"seq": 6, "kind": "route"}\n'
    for commits, violation in (
        ([], False),
        (["memory.sqlite3-wal", "memory.sqlite3-shm"], False),
        (["events.index"], False),  # its writer drops the index on any error
        (["memory.sqlite3-wal", "context-000012.json"], True),
        (None, True),  # a file's fsync: no list
    ):
        why = {"op": "fsync", "path": "/s", **({} if commits is None else {"commits": commits})}
        disk = {"rules": [{"action": "eio", "fired": [why]}]}
        quiet = Outcome([], code=0, stdout=route, disk=disk)
        assert (unclear(quiet, "eio_fsync", "/home") is not None) is violation, commits


def test_lanes_share_the_iterations_out_once_and_their_figures_add_up() -> None:
    lanes = [lane_of(range(3, 3 + 11), 3, j, 4) for j in range(4)]
    assert sorted(i for lane in lanes for i in lane) == list(range(3, 14))
    assert lane_of(range(0, 4), 0, 1, 2) == [1, 3]  # --power mix: odd ones, the power lane
    reports = [{"totals": {"kills": 4, "cuts": 1}}, {"totals": {"kills": 2, "violations": 0}}]
    assert summed(reports) == Counter(kills=6, cuts=1, violations=0)


@pytest.mark.slow
@pytest.mark.timeout(
    900
)  # two iterations, each 2-4 cold tool-worker starts (~10 s idle, minutes under load)
def test_a_short_campaign_of_real_kills_violates_nothing(warm_pool_of_this_session: Path) -> None:
    """The campaign's workers come from the suite's pool, already preloaded (its own would
    preload during the first iteration, whose workers start cold meanwhile); a kill of the
    pool, when a plan has one, is survived: kernels launch it again on demand."""
    base = Path(tempfile.mkdtemp(prefix="jch", dir="/tmp"))  # ipc:// paths stay short
    warm = warm_pool_of_this_session if os.environ.get("JMP_WARM", "1").strip() != "0" else None
    totals, reports, _ = campaign(2, seed=59, base=base, log=False, short=True, warm=warm)
    violations = [v for r in reports for v in r.violations]
    assert not violations, (violations, [str(r.root) for r in reports])
    assert {k.target for r in reports for k in r.plan.kills} >= {"kernel", "mcp"}
    assert totals["kills"] >= 2
    assert totals["completions"] == 2
    shutil.rmtree(base)  # kept only when something was violated


def _aimed(index: int, model: str) -> IterationPlan:
    """A short power iteration cut right after its first tool_finished was written (and
    printed), before any fsync: everything unsynced lost."""
    cut = Cut("fs", 1, "write", LOG, '"kind":"tool_finished"', "after", seed=index)
    return aimed(make_plan(59, index, short=True), cut, model)


POWER = available()


@pytest.mark.slow
@pytest.mark.skipif(POWER is not None, reason=f"power cuts need FUSE: {POWER}")
@pytest.mark.timeout(900)
def test_a_short_power_campaign_violates_nothing(warm_pool_of_this_session: Path) -> None:
    """Three aimed power iterations, one per model, each cut right after its first
    tool_finished was written. At 2b9f963 they found issue 21's classes 1-3 (a printed record
    lost and its seq reused, a new session emptied, a durable tool_started naming a missing
    request artifact); since item 3 every class is a plain failure."""
    base = Path(tempfile.mkdtemp(prefix="jpc", dir="/tmp"))
    warm = warm_pool_of_this_session if os.environ.get("JMP_WARM", "1").strip() != "0" else None
    plans = [_aimed(0, "name"), _aimed(1, "journal"), _aimed(2, "strict")]
    totals, reports, _ = campaign(3, seed=59, base=base, log=False, warm=warm, plans=plans)
    violations = [v for r in reports for v in r.violations]
    assert not violations, (violations, [str(r.root) for r in reports])
    assert totals["cuts"] == 3, table(totals, 0)
    assert totals["completions"] == 3, table(totals, 0)
    shutil.rmtree(base)  # kept only when something was violated
