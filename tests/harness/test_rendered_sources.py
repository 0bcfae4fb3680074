"""Both rendered sources on the script-made site: ChromiumProvider, and CamofoxProvider over the
camofox fake rendering with a real Chromium (as camofox-browser 1.17.0 does with Camoufox); and
the research example end to end on that site through each."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from jev_harness.web import CamofoxProvider, ChromiumProvider, WebError
from jmp_lab.servers.camofox import CamofoxServer
from jmp_lab.servers.jev import JevServer
from jmp_lab.servers.rendered import (
    END_MARKER,
    FACTS_MARKER,
    JS_MARKER,
    LANDING_MARKER,
    LATE_MARKER,
    MIDDLE_MARKER,
    RenderedSite,
)
from tests.harness.helpers import ROOT, HarnessCli
from tests.support.browser import browser_processes, needs_chromium

RESEARCH = ROOT / "examples" / "research_task.py"
pytestmark = needs_chromium


@pytest.fixture(scope="module")
def site() -> Iterator[RenderedSite]:
    with RenderedSite(slow_s=30) as server:
        yield server


@pytest.fixture(scope="module")
def fox() -> Iterator[CamofoxServer]:
    with CamofoxServer(render=True) as server:
        yield server


@pytest.fixture(params=["chromium", "camofox"])
def source(request: pytest.FixtureRequest, site: RenderedSite) -> Iterator[Any]:
    if request.param == "chromium":
        provider: Any = ChromiumProvider(site.url + "/", [site.url])
    else:
        fox = request.getfixturevalue("fox")
        provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    try:
        yield provider
    finally:
        provider.close()


def test_the_script_made_page_its_late_section_and_links(site: RenderedSite, source: Any) -> None:
    page = source.fetch(site.url + "/")
    assert JS_MARKER in page.text and LATE_MARKER in page.text
    assert "late-section" in [s.id for s in page.sections]
    assert site.url + "/facts" in {link.url for link in page.links}
    for noise in ("[e", "/url:", "- main", "list:", '"'):
        assert noise not in page.text, noise


def test_an_http_redirect_lands(site: RenderedSite, source: Any) -> None:
    page = source.fetch(site.url + "/hop")
    assert page.url == site.url + "/landing" and LANDING_MARKER in page.text


@pytest.mark.parametrize(("path", "status"), [("/gone", "404"), ("/broken", "500")])
def test_a_404_or_a_500_is_a_failed_fetch(
    site: RenderedSite, source: Any, path: str, status: str
) -> None:
    with pytest.raises(WebError) as caught:
        source.fetch(site.url + path)
    assert caught.value.code == "http_status" and status in caught.value.message


def test_a_page_past_80000_characters_comes_whole(site: RenderedSite, source: Any) -> None:
    page = source.fetch(site.url + "/long")
    assert not page.truncated and len(page.text) > 100_000
    assert MIDDLE_MARKER in page.text and page.text.rstrip().endswith(f"{END_MARKER}.")
    assert "truncated at char" not in page.text
    assert page.text.count("Paragraph 599 of the long page") == 1


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


@pytest.mark.parametrize("provider", ["chromium", "camofox"])
def test_the_research_example_runs_end_to_end_on_the_rendered_site(
    cli: HarnessCli, site: RenderedSite, fox: CamofoxServer, provider: str
) -> None:
    cli.jev.script(
        [
            {"tool": "web.open_link"},
            {"web.open_link.link": "facts"},
            {"tool": "record_evidence"},
            {"tool": "save_report"},
        ]
    )
    cli.extra_env["CAMOFOX_URL"] = fox.url
    mark = uuid.uuid4().hex
    cli.extra_env["JEV_TEST_BROWSER_RUN"] = mark  # inherited by a browser the run starts
    inputs = {
        "url": site.url + "/",
        "allowed_origins": [site.url],
        "markers": {"answer": FACTS_MARKER},
        "output": "report.json",
        "provider": provider,
        "camofox_session": "research",
    }
    out = cli.run(RESEARCH, "find the harbor's answer", inputs)
    assert out.code == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert out.result["status"] == "completed" and out.result["artifact"]["match"] is True
    report = json.loads((cli.cwd / "report.json").read_text())
    assert [r["label"] for r in report["records"]] == ["answer"]
    assert FACTS_MARKER in report["records"][0]["quote"]
    assert report["records"][0]["source"] == site.url + "/facts"
    finished = [e for e in out.of("tool_finished") if e.get("tool") == "web.open_link"]
    assert len(finished) == 2 and JS_MARKER in json.dumps(finished[0])
    # the run closed its browser: none of its processes is left (Chromium's crash handler,
    # which leaves its parent at start, holds the mark too)
    assert psutil.wait_procs(browser_processes(mark), timeout=60)[1] == []


def test_the_scripts_limits_are_not_the_browsers(cli: HarnessCli, site: RenderedSite) -> None:
    """The task script's memory limit at its least (64 MiB over the worker's own) binds the
    script, not the browser the run starts: Playwright's driver died at start under it and
    Chromium's renderer crashed now and then under the default 1 GiB ("Target crashed"), so
    every rendered page of a `jev-harness run` could fail."""
    cli.extra_env["JEV_HARNESS_MEMORY_MB"] = "64"
    cli.jev.script([{"tool": "web.open_link"}, {"web.open_link.link": "facts"}])
    inputs = {
        "url": site.url + "/",
        "allowed_origins": [site.url],
        "markers": {"answer": FACTS_MARKER},
        "output": "report.json",
        "provider": "chromium",
    }
    out = cli.run(RESEARCH, "find the harbor's answer", inputs)
    finished = [e for e in out.of("tool_finished") if e.get("tool") == "web.open_link"]
    statuses = [e["status"] for e in finished]  # the two scripted; Jev's own picks may 404
    assert statuses[:2] == ["ok", "ok"], out.stderr[-3000:]
    assert JS_MARKER in json.dumps(finished[0])
