"""The report and the archive never go through a planted name (issue 20, item 12).

The receipt reads only a regular file of bounded size at the output, never through a link, and
never blocks (a FIFO, a device); the report write never follows a link among the output's
directories and never replaces a file that is not a jev-harness report (a session's
events.jsonl, say); `--archive` refuses a link, a hard link or a FIFO instead of truncating
what it points at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import jev_harness as jev
from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import ROOT, SCRIPTS, HarnessCli

VICTIM = "precious: a file of the user's\n"


def task_at(output: Path | str) -> tuple[jev.EvidenceTask, str]:
    store = jev.EvidenceStore()
    ref = store.put("intro\n\nThe marker ALPHA-7 is here.\n", "doc.txt")
    task = jev.EvidenceTask(
        store, [], ["ALPHA-7"], {"ALPHA-7": jev.contains("ALPHA-7")}, output,
        jev.markers_verifier(["ALPHA-7"]),
    )  # fmt: skip
    task.configure("find the marker")
    return task, ref


def save(task: jev.EvidenceTask, ref: str) -> jev.Outcome:
    task.operate("read_evidence", task.resolve("read_evidence", {"ref": ref, "window": "w1"}))
    label = task.domain("record_evidence", "label", {})[0]
    passage = task.domain("record_evidence", "passage", {"label": label})[0]
    task.operate("record_evidence", {"label": label, "passage": passage})
    return task.operate("save_report", {})


def test_the_receipt_never_reads_through_a_link(tmp_path: Path) -> None:
    """A link at the output to a file that matches is not the report: exists, no digest."""
    task, ref = task_at(tmp_path / "r.json")
    assert save(task, ref).status == "ok" and task.receipt()["match"] is True
    (tmp_path / "elsewhere.json").write_bytes((tmp_path / "r.json").read_bytes())
    (tmp_path / "r.json").unlink()
    (tmp_path / "r.json").symlink_to(tmp_path / "elsewhere.json")
    receipt = task.receipt()
    assert receipt["exists"] is True and receipt["digest"] is None
    assert receipt["match"] is False and not task.complete()


@pytest.mark.parametrize("planted", ["fifo", "dev_zero"])
def test_the_receipt_of_a_fifo_or_a_device_returns_at_once(tmp_path: Path, planted: str) -> None:
    """Asked on every observe: a FIFO at the output must not hang it, /dev/zero behind a link
    must not fill memory. A child process does the asking, so the old hang fails the test."""
    out = tmp_path / "r.json"
    if planted == "fifo":
        os.mkfifo(out)
    else:
        out.symlink_to("/dev/zero")
    code = (
        "import json, sys; from pathlib import Path; from jev_harness.report import receipt;"
        "print(json.dumps(receipt(Path(sys.argv[1]), {})))"
    )
    limits = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30));"
    done = subprocess.run(
        [sys.executable, "-c", limits + code, str(out)],
        capture_output=True,
        text=True,
        timeout=60,  # a hang detector, not a speed bound: the receipt returns at once or never
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    receipt = json.loads(done.stdout)
    assert receipt["exists"] is True and receipt["digest"] is None and receipt["match"] is False


def test_the_report_is_never_written_through_a_linked_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").symlink_to(elsewhere)
    task, ref = task_at(tmp_path / "out" / "r.json")
    outcome = save(task, ref)
    assert outcome.status == "error" and "symbolic link" in outcome.summary, outcome.summary
    assert list(elsewhere.iterdir()) == []
    assert not task.complete()


def test_the_report_never_replaces_a_file_that_is_not_a_report(tmp_path: Path) -> None:
    notes = tmp_path / "notes.json"
    notes.write_text(VICTIM)
    task, ref = task_at(notes)
    outcome = save(task, ref)
    assert outcome.status == "error" and "not a jev-harness report" in outcome.summary
    assert notes.read_text() == VICTIM
    assert [p.name for p in tmp_path.iterdir()] == ["notes.json"]  # no temp file left


def test_a_report_of_an_earlier_run_is_replaced(tmp_path: Path) -> None:
    first, ref = task_at(tmp_path / "r.json")
    assert save(first, ref).status == "ok"
    second, ref = task_at(tmp_path / "r.json")
    outcome = save(second, ref)
    assert outcome.status == "ok" and second.complete()
    assert json.loads((tmp_path / "r.json").read_text()) == second.report_document()


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev_server:
        yield HarnessCli(short_tmp, jev_server)


def test_a_run_never_replaces_a_sessions_events_jsonl(cli: HarnessCli) -> None:
    """Through the harness worker (jev-harness run): the report output names another
    session's log; save_report is refused, the log stays byte for byte, the run goes on."""
    from tests.harness.mcp_helpers import workspace

    cli.jev.script([{"items.pick.item": "b"}])
    first = cli.run(SCRIPTS / "pick_task.py", "pick b", {"items": ["a", "b"], "target": "b"})
    log = cli.home / first.result["session_id"] / "events.jsonl"
    before = log.read_bytes()
    inputs = {**workspace(cli), "output": str(log)}
    cli.jev.script([{"tool": "files.search"}, {"tool": "files.read"}, {"tool": "record_evidence"}])
    out = cli.run(ROOT / "examples" / "workspace_task.py", "find the codename", inputs)
    assert log.read_bytes() == before
    finished = [e for e in out.of("tool_finished") if e["tool"] == "save_report"]
    assert finished and finished[0]["status"] == "error", out.stdout[-3000:]
    assert "not a jev-harness report" in finished[0]["text"]


@pytest.mark.parametrize("planted", ["symlink", "hardlink", "fifo"])
def test_the_archive_is_never_opened_through_a_planted_name(cli: HarnessCli, planted: str) -> None:
    victim = cli.tmp / "victim.txt"
    victim.write_text(VICTIM)
    archive = cli.cwd / "archive.jsonl"
    reader = None
    if planted == "symlink":
        archive.symlink_to(victim)
    elif planted == "hardlink":
        os.link(victim, archive)
    else:
        os.mkfifo(archive)  # held open for reading, so an old open does not block
        reader = os.open(archive, os.O_RDONLY | os.O_NONBLOCK)
    argv = [
        sys.executable, "-m", "jev_harness.mcp", str(SCRIPTS / "pick_task.py"), "--goal", "pick b",
        "--inputs", json.dumps({"items": ["a", "b"], "target": "b"}), "--direct-only",
        "--sessions-dir", str(cli.home), "--archive", str(archive),
    ]  # fmt: skip
    try:
        done = subprocess.run(
            argv, cwd=cli.cwd, env=cli.env(), stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        if reader is not None:
            os.close(reader)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--archive" in done.stderr and str(archive) in done.stderr
    assert victim.read_text() == VICTIM
    assert not cli.home.exists() or not any(cli.home.iterdir())  # refused before any session


def test_the_archive_makes_its_missing_directories_as_the_output_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed's `--archive local-results/session.jsonl` in a fresh directory (2b9f963: "cannot
    write ... No such file or directory", while `output` made that same directory); a link
    among the directories below the working directory is refused, as for a report."""
    from jev_harness.mcp.cli import Archive, Usage

    monkeypatch.chdir(tmp_path)
    archive = Archive("local-results/deep/session.jsonl")
    archive.close()
    assert (tmp_path / "local-results" / "deep" / "session.jsonl").is_file()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Usage, match="symbolic link"):
        Archive("linked/session.jsonl")
    assert not any((tmp_path / "elsewhere").iterdir())
