"""CamofoxProvider against the loopback fake of camofox-browser's REST API and the test site."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jev_harness as jev
from jev_harness.web import CamofoxProvider, WebError, WebTools
from jev_harness.web.camofox import DEFAULT_BASE_URL
from jmp_lab.servers.camofox import CamofoxServer
from jmp_lab.servers.site import MARKER, SiteServer

KEY = "fox-access-key-0123456789"


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer(slow_s=5) as server:
        yield server


@pytest.fixture
def fox(monkeypatch: pytest.MonkeyPatch) -> Iterator[CamofoxServer]:
    monkeypatch.setenv("CAMOFOX_ACCESS_KEY", KEY)
    with CamofoxServer(key=KEY) as server:
        yield server


def _paths(fox: CamofoxServer, method: str) -> list[str]:
    return [r["path"] for r in fox.requests if r["method"] == method]


def test_owned_tab_is_deleted_once_at_close(site, fox):
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    page = provider.fetch(site.url + "/marker")
    assert MARKER in page.text and [s.id for s in page.sections][:2] == ["marker-page", "the-fact"]
    tab = provider.tab
    assert tab in fox.tabs and provider.owns_tab
    provider.close()
    provider.close()
    assert fox.deleted == [tab] and tab not in fox.tabs
    assert _paths(fox, "DELETE") == [f"/tabs/{tab}"]


def test_caller_tab_is_used_and_never_deleted(site, fox):
    theirs = fox.open_tab("s1")
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", tab=theirs, base_url=fox.url)
    provider.fetch(site.url + "/facts")
    assert f"/tabs/{theirs}/navigate" in _paths(fox, "POST")
    assert "/tabs" not in _paths(fox, "POST")  # no tab of its own
    provider.close()
    assert theirs in fox.tabs and fox.deleted == [] and _paths(fox, "DELETE") == []


def test_final_url_on_another_origin_is_refused_with_no_capture(site, fox):
    store = jev.EvidenceStore()
    kit = WebTools(CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url), store)
    task = jev.Task([kit], store=store)
    kit.materialize(task)
    fox.state.land_on[site.url + "/facts"] = site.other_url + "/elsewhere"
    snapshots = len(_paths(fox, "GET"))
    out = task.operate("web.open_link", task.resolve("web.open_link", {"link": "facts"}))
    assert out.status == "error" and out.data["code"] == "origin_refused"
    assert site.other_url.replace("http://", "") in out.summary
    assert len(store) == 1 and len(_paths(fox, "GET")) == snapshots  # no snapshot, no capture
    redirected = task.operate(
        "web.open_link", task.resolve("web.open_link", {"link": "redirect-other"})
    )
    assert redirected.status == "error" and len(store) == 1
    task.close()
    assert fox.tabs == {}


def test_destination_on_another_origin_never_reaches_the_browser(site, fox):
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    with pytest.raises(WebError, match="origin_refused"):
        provider.fetch(site.other_url + "/secret")
    assert fox.requests == [] and site.requests == []


def test_web_tools_over_camofox_offer_links_and_sections(site, fox):
    store = jev.EvidenceStore()
    kit = WebTools(CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url), store)
    task = jev.Task([kit], store=store)
    kit.materialize(task)
    ids = {o.id for o in task.domain("web.open_link", "link", {})}
    assert "marker" in ids and not any("javascript" in i or "mailto" in i for i in ids)
    task.operate("web.open_link", task.resolve("web.open_link", {"link": "marker"}))
    page = {o.id: o for o in task.domain("web.read_section", "page", {})}["marker"]
    sections = {o.id: o for o in task.domain("web.read_section", "section", {"page": page})}
    out = task.operate("web.read_section", {"page": page, "section": sections["the-fact"]})
    assert MARKER in out.text


def test_bearer_key_is_sent_and_never_returned(site, fox):
    fox.state.leak = True  # a hostile server echoes the header everywhere it can
    store = jev.EvidenceStore()
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    kit = WebTools(provider, store)
    task = jev.Task([kit], store=store)
    outcomes = kit.materialize(task)
    assert all(r["headers"].get("Authorization") == f"Bearer {KEY}" for r in fox.requests)
    options = task.domain("web.open_link", "link", {})
    provider.tab = "no-such-tab"
    with pytest.raises(WebError) as info:
        provider.fetch(site.url + "/facts")
    seen = [repr(provider), str(info.value), str(task.observe()), str(store.references())]
    seen += [store.read(ref, 0, 1200) for ref in store]
    seen += [str(o.to_dict()) for o in outcomes] + [
        f"{o.id} {o.description} {o.value}" for o in options
    ]
    assert "[REDACTED]" in store.read("c1", 0, 1200)
    assert not any(KEY in text for text in seen)


def test_wrong_key_is_a_clear_error_without_the_key(site, fox, monkeypatch):
    monkeypatch.setenv("CAMOFOX_ACCESS_KEY", "wrong-key-abcdef")
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    with pytest.raises(WebError) as info:
        provider.fetch(site.url + "/")
    assert "401" in str(info.value) and "wrong-key-abcdef" not in str(info.value)


def test_base_url_is_loopback_only(monkeypatch):
    monkeypatch.delenv("CAMOFOX_URL", raising=False)
    assert CamofoxProvider("http://a.test/", None, "s").base_url == DEFAULT_BASE_URL
    monkeypatch.setenv("CAMOFOX_URL", "http://localhost:9999/")
    assert CamofoxProvider("http://a.test/", None, "s").base_url == "http://localhost:9999"
    for bad in ("http://10.0.0.5:9377", "http://camofox.example:9377", "ftp://127.0.0.1"):
        with pytest.raises(ValueError, match="camofox base URL"):
            CamofoxProvider("http://a.test/", None, "s", base_url=bad)


def test_a_page_that_moves_before_the_snapshot_is_refused(site, fox):
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    fox.state.drift[site.url + "/facts"] = site.other_url + "/moved"
    with pytest.raises(WebError) as info:
        provider.fetch(site.url + "/facts")
    assert info.value.code == "origin_refused" and "snapshot of" in info.value.message
    assert not any(r["path"].endswith("/links") for r in fox.requests)  # nothing more read
    provider.close()


def test_a_server_without_an_access_key_works(site, monkeypatch):
    """No CAMOFOX_ACCESS_KEY at all (a local camofox-browser without one): fetch captures the
    page (at 623aa1b every scrub was `redact(text, None)`: TypeError)."""
    monkeypatch.delenv("CAMOFOX_ACCESS_KEY", raising=False)
    with CamofoxServer() as fox:
        provider = CamofoxProvider(site.url + "/marker", [site.url], "nokey", base_url=fox.url)
        page = provider.fetch(site.url + "/marker")
        provider.close()
    assert MARKER in page.text
    assert all("Authorization" not in r["headers"] for r in fox.requests)
