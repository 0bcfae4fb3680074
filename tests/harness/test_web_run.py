"""`jev-harness run examples/research_task.py` end to end against the loopback site and Jev."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from jmp_lab.servers.camofox import CamofoxServer
from jmp_lab.servers.jev import JevServer
from jmp_lab.servers.site import MARKER, SiteServer
from tests.harness.helpers import ROOT, HarnessCli
from tests.support.cli import Run
from tests.support.warm import workers_of

RESEARCH = ROOT / "examples" / "research_task.py"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer(slow_s=60) as server:
        yield server


def _inputs(site: SiteServer) -> dict[str, object]:
    return {
        "url": site.url + "/",
        "allowed_origins": [site.url],
        "markers": [MARKER],
        "output": "report.json",
    }


def test_research_run_completes_with_a_matching_receipt(cli: HarnessCli, site: SiteServer) -> None:
    cli.jev.script(
        [
            {"tool": "web.open_link"},
            {"web.open_link.link": "marker"},
            {"tool": "record_evidence"},
            {"tool": "save_report"},
        ]
    )
    out = cli.run(RESEARCH, "find the harbor code", _inputs(site))
    assert out.code == 0, out.stderr[-3000:]
    receipt = out.result["artifact"]
    assert out.result["status"] == "completed" and receipt["match"] is True
    report = json.loads((cli.cwd / "report.json").read_text())
    assert receipt["path"] == str(cli.cwd / "report.json") and receipt["record_count"] == 1
    assert MARKER in report["records"][0]["quote"]
    started = out.of("tool_started")
    assert [s["tool"] for s in started][:2] == ["web.open_link", "web.open_link"]
    assert site.count("/") == 1 and site.count("/marker") == 1
    assert [r for r in site.requests if r["origin"] == "other"] == []
    bodies = json.dumps(cli.jev.systemone_bodies()).lower()
    for never in ("javascript:", "mailto:", "data:text", site.other_url.lower()):
        assert never not in bodies


def test_kill_during_slow_page_is_uncertain_and_never_refetched(
    cli: HarnessCli, site: SiteServer
) -> None:
    cli.jev.script([{"tool": "web.open_link"}, {"web.open_link.link": "slow"}])
    argv = cli.run_argv(RESEARCH, "read the slow page", _inputs(site))
    proc = subprocess.Popen(
        argv, cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert site.wait_for("/slow", timeout=60), "the slow page was never asked for"
        workers = workers_of(proc.pid, "harness")
        assert len(workers) == 1
        workers[0].send_signal(signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out = Run.parsed(proc.returncode, stdout, stderr)
    assert out.code == 2 and out.result["status"] == "blocked"
    uncertain = out.of("tool_uncertain")
    assert len(uncertain) == 1 and uncertain[0]["tool"] == "web.open_link"
    assert uncertain[0]["cause"] == "worker_exit"
    site.release_slow()
    inspected = cli.inspect(out.result["session_id"])
    assert inspected.code == 0
    assert site.count("/slow") == 1  # no second request, neither by the run nor by inspect


def test_camofox_run_deletes_its_tab_and_never_shows_the_key(
    cli: HarnessCli, site: SiteServer
) -> None:
    key = "camofox-access-key-0123456789"
    with CamofoxServer(key=key) as fox:
        fox.state.leak = True  # the server echoes the key wherever it can
        cli.extra_env.update(CAMOFOX_URL=fox.url, CAMOFOX_ACCESS_KEY=key)
        cli.jev.script(
            [
                {"tool": "web.open_link"},
                {"web.open_link.link": "marker"},
                {"tool": "record_evidence"},
                {"tool": "save_report"},
            ]
        )
        inputs = {**_inputs(site), "provider": "camofox", "camofox_session": "run1"}
        out = cli.run(RESEARCH, "find the harbor code", inputs)
        assert out.code == 0, out.stderr[-3000:]
        assert out.result["status"] == "completed" and out.result["artifact"]["match"] is True
        assert fox.tabs == {} and len(fox.deleted) == 1
    assert key not in out.stdout + out.stderr
    for path in cli.home.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert key not in (cli.cwd / "report.json").read_text()
