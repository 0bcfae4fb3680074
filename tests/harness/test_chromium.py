"""ChromiumProvider on a real headless Chromium against the script-made loopback site."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import jev_harness as jev
from jev_harness.web import ChromiumProvider, HttpProvider, WebError, WebTools
from jev_harness.web.browser import Browser, find_chromium
from jmp_lab.servers.rendered import (
    END_MARKER,
    FACTS_MARKER,
    JS_MARKER,
    LANDING_MARKER,
    LATE_MARKER,
    MIDDLE_MARKER,
    OUTSIDE,
    RenderedSite,
)
from tests.support.browser import needs_chromium


@pytest.fixture
def site() -> Iterator[RenderedSite]:
    with RenderedSite(slow_s=30) as server:
        yield server


@pytest.fixture
def browser(site: RenderedSite) -> Iterator[ChromiumProvider]:
    provider = ChromiumProvider(site.url + "/", [site.url])
    try:
        yield provider
    finally:
        provider.close()


def _ours() -> list[psutil.Process]:
    """This test process's browser and driver processes."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if any(n in " ".join(proc.cmdline()) for n in ("chromium", "playwright")):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@needs_chromium
def test_script_made_text_links_and_the_late_section_are_captured(
    site: RenderedSite, browser: ChromiumProvider
) -> None:
    page = browser.fetch(site.url + "/")
    assert JS_MARKER in page.text and LATE_MARKER in page.text
    assert page.title == "Rendered harbor" and page.hops == ()
    assert [s.id for s in page.sections] == ["rendered-harbor", "places", "late-section"]
    urls = {link.url for link in page.links}
    assert {site.url + "/facts", site.url + "/hop", OUTSIDE} <= urls
    assert "[e" not in page.text and "/url:" not in page.text and "list:" not in page.text
    assert site.count("/api/late") == 1
    # the same page over plain HTTP has none of it: the text is made by the script
    plain = HttpProvider(site.url + "/", [site.url]).fetch(site.url + "/")
    assert JS_MARKER not in plain.text and LATE_MARKER not in plain.text
    assert browser.describe()["browser"] == find_chromium()
    assert browser.describe()["browser_version"].split(".")[0].isdigit()


@needs_chromium
def test_http_and_script_redirects_land_and_are_hops(
    site: RenderedSite, browser: ChromiumProvider
) -> None:
    for path in ("/hop", "/js-hop"):
        page = browser.fetch(site.url + path)
        assert page.url == site.url + "/landing" and page.requested_url == site.url + path
        assert page.hops == (site.url + "/landing",) and LANDING_MARKER in page.text


@needs_chromium
def test_a_404_is_a_failed_fetch_that_names_the_status(
    site: RenderedSite, browser: ChromiumProvider
) -> None:
    with pytest.raises(WebError) as caught:
        browser.fetch(site.url + "/gone")
    assert caught.value.code == "http_status" and "404" in caught.value.message


@needs_chromium
def test_a_script_that_leaves_the_allowed_origins_is_refused_without_capture(
    site: RenderedSite,
) -> None:
    with RenderedSite() as other:
        provider = ChromiumProvider(site.url + "/", [site.url])
        try:
            with pytest.raises(WebError) as caught:
                provider.fetch(f"{site.url}/js-away?to={other.url}/landing")
        finally:
            provider.close()
    assert caught.value.code == "origin_refused" and other.url in caught.value.message


def test_a_refused_destination_never_starts_the_browser(site: RenderedSite) -> None:
    provider = ChromiumProvider(site.url + "/", [site.url])
    for bad in (OUTSIDE, "file:///etc/passwd", "http://u:p@127.0.0.1/"):
        with pytest.raises(WebError):
            provider.fetch(bad)
    assert provider.browser.dir is None and provider.browser.version == ""
    provider.close()


@needs_chromium
def test_the_deadline_ends_a_slow_page_and_the_next_fetch_works(site: RenderedSite) -> None:
    provider = ChromiumProvider(site.url + "/", [site.url], deadline_s=8)  # /slow holds 30 s
    try:
        with pytest.raises(WebError) as caught:
            provider.fetch(site.url + "/slow")
        assert caught.value.code == "timeout"
        assert FACTS_MARKER in provider.fetch(site.url + "/facts").text
    finally:
        provider.close()


@needs_chromium
def test_size_bounds_cut_the_text_and_refuse_a_huge_document(site: RenderedSite) -> None:
    cut = ChromiumProvider(site.url + "/", [site.url], max_chars=5000)
    huge = ChromiumProvider(site.url + "/", [site.url], max_dom_chars=10_000)
    try:
        page = cut.fetch(site.url + "/long")
        assert page.truncated and len(page.text) == 5000 and END_MARKER not in page.text
        with pytest.raises(WebError) as caught:
            huge.fetch(site.url + "/long")
        assert caught.value.code == "too_large"
    finally:
        cut.close()
        huge.close()
    whole = ChromiumProvider(site.url + "/", [site.url])
    try:
        page = whole.fetch(site.url + "/long")
    finally:
        whole.close()
    assert not page.truncated and MIDDLE_MARKER in page.text and END_MARKER in page.text


@needs_chromium
def test_every_page_gets_a_fresh_context(site: RenderedSite, browser: ChromiumProvider) -> None:
    for _ in range(2):
        assert "Visits remembered: 1." in browser.fetch(site.url + "/visits").text


@needs_chromium
def test_one_browser_per_provider_and_close_leaves_no_process(site: RenderedSite) -> None:
    provider = ChromiumProvider(site.url + "/", [site.url])
    provider.fetch(site.url + "/")
    first = provider.browser.dir
    provider.fetch(site.url + "/facts")
    assert provider.browser.dir == first and _ours()
    provider.close()
    provider.close()  # idempotent
    assert _ours() == [] and provider.browser.dir is None


@needs_chromium
def test_web_tools_offer_rendered_links_on_allowed_origins_only(
    site: RenderedSite, browser: ChromiumProvider
) -> None:
    store = jev.EvidenceStore()
    kit = WebTools(browser, store)
    task = jev.Task([kit])
    outcome = kit.materialize(task)[0]
    assert outcome.status == "ok" and JS_MARKER in store.read(outcome.data["ref"], 0, 1200)
    offered = {o.value for o in kit._link_domain(task, {})}
    assert site.url + "/facts" in offered and OUTSIDE not in offered


def test_a_missing_browser_is_a_clear_error_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JEV_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(WebError) as caught:
        find_chromium()
    assert caught.value.code == "browser_missing"
    assert "JEV_CHROMIUM" in caught.value.message and "apt-get install" in caught.value.message
    said = ChromiumProvider("http://127.0.0.1:1/").describe()["browser"]
    assert said.startswith("none: JEV_CHROMIUM=") and "apt-get install" in said
    monkeypatch.delenv("JEV_CHROMIUM")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WebError, match=r"no Chromium found on PATH.*make install-browser"):
        Browser().start()


@needs_chromium
def test_a_killed_driver_takes_the_whole_browser_with_it(site: RenderedSite) -> None:
    """Playwright's driver is the browser's parent: when it dies (as it does when the worker
    dies and its pipe closes), PR_SET_PDEATHSIG kills Chromium's main process at once, and its
    zygotes, renderers and helpers follow it."""
    provider = ChromiumProvider(site.url + "/", [site.url])
    try:
        provider.fetch(site.url + "/")
        ours = _ours()
        driver = [p for p in ours if "playwright/driver" in " ".join(p.cmdline())]
        main = [p for p in psutil.Process(driver[0].pid).children() if "chromium" in p.name()]
        assert len(driver) == 1 and len(main) == 1 and len(ours) > 3
        launcher = Path(str(provider.browser.dir), "launch-chromium").read_text()
        assert "setpriv" in launcher and "--pdeathsig KILL" in launcher
        driver[0].kill()
        assert psutil.wait_procs(main, timeout=30)[1] == []  # the main process, at once
        assert psutil.wait_procs(ours, timeout=60)[1] == []  # then every other one
    finally:
        provider.close()


@needs_chromium
def test_a_browser_that_stops_answering_is_killed_at_close() -> None:
    """A call that outlives its timeout marks the browser unusable; close() then kills the
    driver it started and everything under it instead of waiting for them."""
    browser = Browser()
    browser.start()
    ours = _ours()
    assert ours
    with pytest.raises(WebError) as caught:
        browser.call(lambda _b: time.sleep(60), 1.0)  # the browser's thread is stuck
    assert caught.value.code == "timeout"
    with pytest.raises(WebError, match="unusable"):
        browser.call(lambda b: b.version, 5.0)
    browser.close()
    assert psutil.wait_procs(ours, timeout=30)[1] == [] and browser.dir is None


ROOT = Path(__file__).resolve().parents[2]
NEEDS_IT = "tests/harness/test_chromium.py::test_every_page_gets_a_fresh_context"


def _pytest_without_a_browser(tmp: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    """A test marked needs_chromium, run by pytest where JEV_CHROMIUM names no browser."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("JMP_REQUIRE_BROWSER", "PYTEST_ADDOPTS")
    }
    env["JEV_CHROMIUM"] = str(tmp / "no-such-chromium")
    env.pop("PYTEST_XDIST_WORKER", None)
    if require is not None:
        env["JMP_REQUIRE_BROWSER"] = require
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    return subprocess.run(
        [*argv, NEEDS_IT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_require_browser_turns_the_skip_into_a_failure_naming_the_missing_part(
    tmp_path: Path,
) -> None:
    skipped = _pytest_without_a_browser(tmp_path, None)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout[-2000:]
    assert "no browser: JEV_CHROMIUM=" in skipped.stdout
    assert _pytest_without_a_browser(tmp_path, "0").returncode == 0  # 0 is off
    failed = _pytest_without_a_browser(tmp_path, "1")
    assert failed.returncode == 1 and "1 error" in failed.stdout, failed.stdout[-2000:]  # at setup
    assert "JMP_REQUIRE_BROWSER=1 but no browser: JEV_CHROMIUM=" in failed.stdout
    assert "no-such-chromium" in failed.stdout and "apt-get install" in failed.stdout


# Imported first (PYTHONPATH), it makes every import of playwright fail as on a machine
# without the package.
BLOCK_PLAYWRIGHT = """
import sys


class _NoPlaywright:
    def find_spec(self, name, path=None, target=None):
        if name == "playwright" or name.startswith("playwright."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoPlaywright())
"""
FETCH = """
import json, sys
from jev_harness.web import ChromiumProvider, WebError

provider = ChromiumProvider(sys.argv[1] + "/", [sys.argv[1]])
said = provider.describe()["browser"]
try:
    provider.fetch(sys.argv[1] + "/")
except WebError as exc:
    print(json.dumps({"said": said, "code": exc.code, "message": exc.message}))
finally:
    provider.close()
"""


def test_a_missing_playwright_is_a_clear_error_naming_the_install_command(
    tmp_path: Path, site: RenderedSite
) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCK_PLAYWRIGHT)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    run = subprocess.run(
        [sys.executable, "-c", FETCH, site.url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["code"] == "browser_missing", out
    for text in (out["message"], out["said"]):
        assert "playwright is not installed" in text and "pip install 'jmp-agent[browser]'" in text
    assert site.count("/") == 0  # nothing was fetched
