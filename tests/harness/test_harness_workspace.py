"""Issue 13's done-when: examples/workspace_task.py run by Jev to a verified receipt."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import JEV_KEY, ROOT, HarnessCli

EXAMPLE = ROOT / "examples" / "workspace_task.py"
MARKER = "ORCA-7"
SECRET = "TOPSECRET-codename-5f1e2d"
STEPS = [
    {"tool": "files.search"},  # the query, the path, the label and the passage are single options
    {"tool": "files.read"},
    {"tool": "record_evidence"},
    {"tool": "save_report"},
]


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def corpus(cli: HarnessCli, hostile: bool) -> dict[str, object]:
    root = cli.cwd / "proj"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text(
        f"Intro line.\n\nThe release codename is {MARKER}, chosen in May.\n\nOther text.\n"
    )
    (root / "readme.txt").write_text("nothing here\n")
    if hostile:
        outside = cli.tmp / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text(f"the codename is {SECRET}\n")
        os.symlink(outside / "secret.txt", root / "leak.txt")
        os.symlink(outside, root / "linkdir")
        os.mkfifo(root / "pipe")
    return {"root": "proj", "queries": ["codename"], "markers": [MARKER], "output": "r.json"}


def check_completed(cli: HarnessCli, out: object) -> dict[str, object]:
    assert out.code == 0, out.stderr[-3000:]  # type: ignore[attr-defined]
    result = out.result  # type: ignore[attr-defined]
    assert result["status"] == "completed"
    artifact = result["artifact"]
    assert artifact["match"] is True and artifact["exists"] is True
    assert artifact["path"] == str(cli.cwd / "r.json")
    report = json.loads((cli.cwd / "r.json").read_text())
    assert any(MARKER in r["quote"] for r in report["records"])
    receipts = out.of("receipt")  # type: ignore[attr-defined]
    assert len(receipts) == 1 and receipts[0]["match"] is True and receipts[0]["verdict"] is True
    kinds = out.kinds()  # type: ignore[attr-defined]
    assert kinds[kinds.index("receipt") - 1] == "tool_finished"  # right after save_report
    for body in cli.jev.systemone_bodies():
        assert len(body["state"].encode()) <= 8192
        size = len(json.dumps(body["questions"], ensure_ascii=False).encode())
        assert size + len(body["state"].encode()) <= 24_000
    return dict(result)


def test_workspace_task_completes_with_a_matching_receipt(cli: HarnessCli) -> None:
    inputs = corpus(cli, hostile=False)
    cli.jev.script(STEPS)
    out = cli.run(EXAMPLE, "Find the release codename", inputs)
    check_completed(cli, out)
    methods = [p["method"] for p in out.of("parameter")]
    assert methods and set(methods) == {"single_option"}  # every domain had one option
    assert [r["choice"] for r in out.of("route")] == [s["tool"] for s in STEPS]


def test_symlinks_and_a_fifo_neither_leak_nor_hang(cli: HarnessCli) -> None:
    inputs = corpus(cli, hostile=True)
    cli.jev.script(STEPS)
    out = cli.run(EXAMPLE, "Find the release codename", inputs)
    result = check_completed(cli, out)
    assert SECRET not in out.stdout and SECRET not in out.stderr
    for path in Path(str(result["session_dir"])).rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in json.dumps(cli.jev.systemone_bodies())


def test_a_captured_key_is_redacted_in_the_report_the_worker_writes(cli: HarnessCli) -> None:
    """Issue 9 item 5: the harness worker writes the report itself, so it gets the known
    secrets (LoadTask.secrets) and redacts them; the quote still matches its marker."""
    inputs = corpus(cli, hostile=False)
    notes = cli.cwd / "proj" / "docs" / "notes.md"
    notes.write_text(notes.read_text().replace("chosen in May", f"key {JEV_KEY} in May"))
    cli.jev.script(STEPS)
    out = cli.run(EXAMPLE, "Find the release codename", inputs)
    check_completed(cli, out)
    report = (cli.cwd / "r.json").read_text()
    assert JEV_KEY not in report and "[REDACTED]" in report
    assert JEV_KEY not in out.stdout + out.stderr
    assert JEV_KEY not in json.dumps(cli.jev.systemone_bodies())
