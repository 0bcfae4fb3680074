"""CamofoxProvider against the loopback fake of camofox-browser's REST API and the test site."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

import jev_harness as jev
from jev_harness.web import CamofoxProvider, WebError, WebTools
from jev_harness.web.aria import snapshot_text
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
    provider.tab, provider.owns_tab = "no-such-tab", False  # a caller's tab the server lost
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


def test_a_server_without_an_access_key_works(
    site: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No CAMOFOX_ACCESS_KEY at all (a local camofox-browser without one): fetch captures the
    page (at 623aa1b every scrub was `redact(text, None)`: TypeError)."""
    monkeypatch.delenv("CAMOFOX_ACCESS_KEY", raising=False)
    with CamofoxServer() as fox:
        provider = CamofoxProvider(site.url + "/marker", [site.url], "nokey", base_url=fox.url)
        page = provider.fetch(site.url + "/marker")
        provider.close()
    assert MARKER in page.text
    assert all("Authorization" not in r["headers"] for r in fox.requests)


# -- camofox-browser 1.17.0 as it speaks (jmp_lab/servers/camofox.py follows its server.js) ----


def _long_yaml(total: int) -> str:
    """A snapshot of about `total` characters whose every line is numbered (exactly `total`)."""
    lines, size, n = [], 0, 0
    while size < total:
        line = f"- paragraph: line {n:06d} of the long page"
        lines.append(line)
        size += len(line) + 1
        n += 1
    text = "\n".join(lines)
    return text[:total] if len(text) >= total else text + "x" * (total - len(text))


@pytest.mark.parametrize("total", [80_001, 79_900 + 74_800, 200_000, 154_799, 154_801])
def test_a_truncated_snapshot_is_followed_to_its_end(
    site: SiteServer, fox: CamofoxServer, total: int
) -> None:
    yaml = _long_yaml(total)
    url = site.url + "/long-canned"
    fox.state.canned[url] = yaml
    provider = CamofoxProvider(url, [site.url], "s1", base_url=fox.url)
    page = provider.fetch(url)
    provider.close()
    whole, _ = snapshot_text(yaml)
    assert page.text == whole and not page.truncated
    assert "truncated at char" not in page.text and "Call snapshot" not in page.text
    offsets = [r["path"] for r in fox.requests if r["path"].endswith("/snapshot")]
    assert len(offsets) == 1 + (total - 5000 - 1) // 74_800  # one window per 74,800 characters


def test_a_window_that_is_not_the_one_asked_for_is_a_visible_omission(
    site: SiteServer, fox: CamofoxServer
) -> None:
    url = site.url + "/long-canned"
    fox.state.canned[url] = _long_yaml(200_000)
    fox.state.forget = True  # the server lost its cached snapshot: every answer is window one
    provider = CamofoxProvider(url, [site.url], "s1", base_url=fox.url)
    page = provider.fetch(url)
    provider.close()
    assert page.truncated and "line 000000 " in page.text
    omitted = "characters 74800 to 200000 of this page's snapshot were not returned by camofox"
    assert page.text.count(omitted) == 1 and page.text.count("line 000000 ") == 1
    assert "truncated at char" not in page.text


def test_the_text_cap_stops_following_windows(site: SiteServer, fox: CamofoxServer) -> None:
    url = site.url + "/long-canned"
    fox.state.canned[url] = _long_yaml(400_000)
    provider = CamofoxProvider(url, [site.url], "s1", base_url=fox.url, max_chars=60_000)
    page = provider.fetch(url)
    provider.close()
    assert page.truncated and len(page.text) == 60_000
    assert len([r for r in fox.requests if r["path"].endswith("/snapshot")]) == 2


def test_snapshot_text_keeps_what_a_reader_needs() -> None:
    yaml = "\n".join(
        [
            "- main:",
            '  - heading "Harbor" [level=1]',
            "  - list:",
            "    - listitem [e1]:",
            '      - link "Docs" [e2]:',
            "        - /url: /docs",
            '  - paragraph: "Code: cobalt"',
            '  - button "Go" [e3]',
            "  - text: plain words",
        ]
    )
    text, starts = snapshot_text(yaml)
    assert text == "# Harbor\nDocs\nCode: cobalt\nbutton: Go\nplain words\n"
    assert starts == [(0, "Harbor")]


def test_a_navigation_that_is_not_2xx_is_a_failed_fetch_naming_the_status(
    site: SiteServer, fox: CamofoxServer
) -> None:
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    with pytest.raises(WebError) as caught:
        provider.fetch(site.url + "/no-such-page")
    provider.close()
    assert caught.value.code == "http_status" and "HTTP 404" in caught.value.message


def test_a_browser_restart_fails_the_fetch_and_the_next_one_opens_a_new_tab(
    site: SiteServer, fox: CamofoxServer
) -> None:
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    provider.fetch(site.url + "/")
    first = provider.tab
    fox.restart()
    with pytest.raises(WebError) as caught:
        provider.fetch(site.url + "/marker")
    assert caught.value.code == "browser_restarted" and "410" in caught.value.message
    assert MARKER in provider.fetch(site.url + "/marker").text
    assert provider.tab not in (None, first)
    provider.close()
    assert fox.tabs == {}


def test_the_tab_limit_is_a_clear_error(site: SiteServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMOFOX_ACCESS_KEY", raising=False)
    with CamofoxServer(max_tabs=1) as fox:
        fox.open_tab("s1")
        provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
        with pytest.raises(WebError) as caught:
            provider.fetch(site.url + "/")
    assert caught.value.code == "tab_limit" and "429" in caught.value.message
    assert "'s1'" in caught.value.message


@pytest.mark.parametrize("key", ["url", "href"])
def test_links_carry_url_or_href(site: SiteServer, fox: CamofoxServer, key: str) -> None:
    fox.state.link_key = key
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    page = provider.fetch(site.url + "/")
    provider.close()
    assert site.url + "/marker" in {link.url for link in page.links}
    assert [r for r in fox.requests if "links" in r["path"]]


def _ask(fox: CamofoxServer, path: str) -> tuple[int, dict[str, Any]]:
    """GET `path` of the fake with the key, as a client would: (status, JSON body)."""
    parts = urlsplit(fox.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {KEY}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("where", "code", "said"),
    [
        ("crash_on", "page_crashed", "Page crashed. Open a new tab."),
        ("destroy_on", "tab_destroyed", "Tab was destroyed. Open a new tab."),
    ],
)
def test_a_tab_the_server_destroyed_fails_with_its_code_and_the_next_fetch_opens_a_new_tab(
    site: SiteServer, fox: CamofoxServer, where: str, code: str, said: str
) -> None:
    """camofox-browser 1.17.0 answers 410 for a crashed page (the tab destroyed) and for a tab
    destroyed while the request waited, not only after a browser restart."""
    getattr(fox.state, where).add(site.url + "/facts")
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    provider.fetch(site.url + "/")
    first = provider.tab
    with pytest.raises(WebError) as caught:
        provider.fetch(site.url + "/facts")
    assert caught.value.code == code and "410" in caught.value.message
    assert said in caught.value.message and "next fetch opens a new one" in caught.value.message
    assert provider.tab is None and first not in fox.tabs
    assert _ask(fox, f"/tabs/{first}/snapshot?userId=s1") == (404, {"error": "Tab not found"})
    assert MARKER in provider.fetch(site.url + "/marker").text
    assert provider.tab not in (None, first) and _paths(fox, "POST").count("/tabs") == 2
    provider.close()
    assert fox.tabs == {}


def test_a_tab_lost_to_a_restart_long_ago_is_replaced_once_and_the_fetch_goes_on(
    site: SiteServer, fox: CamofoxServer
) -> None:
    """More than 5 minutes after a restart the real server answers 404 "Tab not found" for the
    tab the provider holds: the provider opens a new one, once, and navigates there."""
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", base_url=fox.url)
    provider.fetch(site.url + "/")
    first = provider.tab
    fox.restart(ago_s=301)
    assert _ask(fox, f"/tabs/{first}/snapshot?userId=s1") == (404, {"error": "Tab not found"})
    page = provider.fetch(site.url + "/marker")
    assert MARKER in page.text and provider.tab not in (None, first) and provider.owns_tab
    navigations = [p for p in _paths(fox, "POST") if p.endswith("/navigate")]
    assert navigations[-2:] == [f"/tabs/{first}/navigate", f"/tabs/{provider.tab}/navigate"]
    assert _paths(fox, "POST").count("/tabs") == 2 and site.count("/marker") == 1
    assert MARKER in provider.fetch(site.url + "/marker").text  # and the later ones too
    provider.close()
    assert fox.tabs == {}


def test_within_five_minutes_of_a_restart_only_a_uuid_tab_is_browser_restarted(
    fox: CamofoxServer,
) -> None:
    fox.restart(ago_s=299)
    gone = "0b6e8f7a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    status, body = _ask(fox, f"/tabs/{gone}/snapshot?userId=s1")
    assert status == 410 and body["code"] == "browser_restarted"
    assert _ask(fox, "/tabs/non-existent-tab/snapshot?userId=s1") == (
        404,
        {"error": "Tab not found"},
    )


def test_a_callers_tab_that_is_gone_is_not_replaced(site: SiteServer, fox: CamofoxServer) -> None:
    theirs = fox.open_tab("s1")
    provider = CamofoxProvider(site.url + "/", [site.url], "s1", tab=theirs, base_url=fox.url)
    fox.restart(ago_s=600)
    with pytest.raises(WebError) as caught:
        provider.fetch(site.url + "/marker")
    assert caught.value.code == "tab_gone" and "404" in caught.value.message
    assert theirs in caught.value.message and "pass another tab=" in caught.value.message
    assert provider.tab == theirs and "/tabs" not in _paths(fox, "POST")
    provider.close()
    assert _paths(fox, "DELETE") == []
