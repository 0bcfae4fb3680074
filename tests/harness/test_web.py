"""WebTools over HttpProvider against the two-origin loopback site (real sockets, no mocks)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import jev_harness as jev
from jev_harness.text import MAX_WINDOW_CHARS
from jev_harness.web import HttpProvider, WebError, WebTools
from jev_harness.web.urls import is_inward, normalize_origins
from jmp_lab.servers.site import CP1251_TEXT, MARKER, SiteServer


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer(slow_s=5) as server:
        yield server


def _task(site: SiteServer, **kw: Any) -> tuple[jev.Task, WebTools, jev.EvidenceStore]:
    store = jev.EvidenceStore()
    kit = WebTools(HttpProvider(site.url + "/", [site.url], **kw), store)
    task = jev.Task([kit], store=store)
    kit.materialize(task)
    return task, kit, store


def _open(task: jev.Task, link_id: str) -> jev.Outcome:
    return task.operate("web.open_link", task.resolve("web.open_link", {"link": link_id}))


def _other(site: SiteServer) -> list[dict[str, Any]]:
    return [r for r in site.requests if r["origin"] == "other"]


def test_entry_capture_is_lazy_and_offered_once_as_an_operation(site):
    store = jev.EvidenceStore()
    kit = WebTools(HttpProvider(site.url + "/", [site.url]), store)
    task = jev.Task([kit], store=store)
    task.observe(), task.offered_tools(), kit.observe()
    assert site.requests == [] and len(store) == 0  # building and observing fetch nothing
    ops = task.entry_operations()
    assert [(tool.name, chosen["link"].value) for tool, chosen in ops] == [
        ("web.open_link", site.url + "/")
    ]
    assert task.entry_operations() == []
    outcome = task.operate(*ops[0])
    assert outcome.status == "ok" and outcome.window == ("c1", 0, len(outcome.text))
    assert site.count("/") == 1 and kit.entry_operations(task) == []


def test_redirect_to_other_origin_ends_as_error_and_other_origin_sees_nothing(site):
    task, _, store = _task(site)
    offered = {o.value for o in task.domain("web.open_link", "link", {})}
    assert not any(url.startswith(site.other_url) for url in offered)
    outcome = _open(task, "redirect-other")
    assert outcome.status == "error" and outcome.data["code"] == "origin_refused"
    assert site.other_url.replace("http://", "") in outcome.summary
    assert len(store) == 1 and _other(site) == []
    with pytest.raises(WebError, match="origin_refused"):
        HttpProvider(site.url + "/", [site.url]).fetch(site.other_url + "/secret")
    assert _other(site) == []


def test_offered_links_exclude_script_mail_data_userinfo_and_fragments(site):
    task, kit, _ = _task(site)
    first = task.domain("web.open_link", "link", {})
    texts = " ".join(f"{o.id} {o.description} {o.value}" for o in first).lower()
    for bad in ("javascript", "mailto", "data:", "tel:", "user:secret", "#", "@"):
        assert bad not in texts
    urls = [o.value for o in first]
    assert len(urls) == len(set(urls)) and all(kit.provider.allows(u) for u in urls)
    assert site.url + "/" not in urls  # captured already (the fragment-only link)
    assert all(len(o.description) <= 200 and o.value in o.description for o in first)
    assert [o.id for o in task.domain("web.open_link", "link", {})] == [o.id for o in first]
    assert _open(task, "marker").status == "ok"
    assert "marker" not in {o.id for o in task.domain("web.open_link", "link", {})}


def test_a_page_is_captured_once_and_sections_are_read_from_the_store(site):
    task, _, store = _task(site)
    assert _open(task, "marker").status == "ok"
    pages = {o.id: o for o in task.domain("web.read_section", "page", {})}
    sections = {
        o.id: o for o in task.domain("web.read_section", "section", {"page": pages["marker"]})
    }
    assert list(sections) == ["marker-page", "the-fact", "footnotes"]
    out = task.operate(
        "web.read_section", {"page": pages["marker"], "section": sections["the-fact"]}
    )
    assert MARKER in out.text and out.window is not None
    ref, start, end = out.window
    assert store.read(ref, start, end - start) == out.text
    assert site.count("/marker") == 1 and len(store) == 2


def test_five_megabyte_page_is_truncated_at_the_cap_and_windows_stay_bounded(site):
    task, _, store = _task(site)
    out = _open(task, "big")
    assert out.status == "ok" and out.data["truncated"] is True
    assert out.data["bytes"] == 2 * 1024 * 1024 and "truncated" in out.summary
    assert len(out.text) <= MAX_WINDOW_CHARS
    page = {o.id: o for o in task.domain("web.read_section", "page", {})}["big"]
    parts = task.domain("web.read_section", "section", {"page": page})
    assert len(parts) > 1000
    for part in parts[:3] + parts[-3:]:
        result = task.operate("web.read_section", {"page": page, "section": part})
        assert 0 < len(result.text) <= MAX_WINDOW_CHARS
    with pytest.raises(ValueError):
        store.read(out.data["ref"], 0, MAX_WINDOW_CHARS + 1)
    assert site.count("/big") == 1


def test_binary_is_refused_without_capture(site):
    task, _, store = _task(site)
    out = _open(task, "binary")
    assert out.status == "error" and out.data["code"] == "not_text" and "image/png" in out.summary
    assert len(store) == 1
    assert "binary" not in {o.id for o in task.domain("web.open_link", "link", {})}


def test_redirect_loop_and_endless_chain_end(site):
    task, _, _ = _task(site)
    loop = _open(task, "loop")
    assert loop.status == "error" and loop.data["code"] == "redirect_loop"
    assert site.count("/loop") == 1 and site.count("/loop2") == 1
    chain = _open(task, "chain/0")
    assert chain.status == "error" and chain.data["code"] == "too_many_redirects"
    chained = [r for r in site.requests if r["path"].startswith("/chain/")]
    assert len(chained) == 6  # the first request and five redirects, no more


def test_charset_declared_only_in_a_meta_tag_is_used(site):
    task, _, store = _task(site)
    out = _open(task, "cp1251")
    assert out.status == "ok" and CP1251_TEXT in out.text
    assert store.describe(out.data["ref"])["metadata"]["charset"] == "cp1251"


def test_scripts_styles_dropped_get_only_and_links_absolute(site):
    _, kit, store = _task(site)
    text = store.read("c1", 0, 1200)
    assert "script text must not appear" not in text and "color: red" not in text
    assert {r["method"] for r in site.requests} == {"GET"}
    assert all(link.url.startswith("http") for link in kit.pages[0].page.links)


def test_user_info_and_schemes_refused_before_any_request(site):
    provider = HttpProvider(site.url + "/", [site.url])
    host = site.url.split("//")[1]
    for url, code in (
        (f"http://user:pw@{host}/", "userinfo_refused"),
        (f"ftp://{host}/", "scheme_refused"),
        ("javascript:alert(1)", "scheme_refused"),
    ):
        with pytest.raises(WebError) as info:
            provider.fetch(url)
        assert info.value.code == code
    assert site.requests == []
    with pytest.raises(ValueError, match="not on an allowed origin"):
        HttpProvider(site.other_url + "/", [site.url])


def test_public_name_resolving_inward_is_refused_unless_listed(site):
    port = site.url.rsplit(":", 1)[1]
    inward = HttpProvider(
        f"http://public.test:{port}/",
        [f"http://public.test:{port}"],
        resolver=lambda host, p: ["127.0.0.1"],
    )
    with pytest.raises(WebError) as info:
        inward.fetch(f"http://public.test:{port}/")
    assert info.value.code == "address_refused" and "127.0.0.1" in info.value.message
    assert site.requests == []
    listed = HttpProvider(f"http://localhost:{port}/", [f"http://localhost:{port}"])
    assert listed.fetch(f"http://localhost:{port}/marker").title == "Marker page"
    for address in ("10.0.0.1", "169.254.169.254", "::1", "::ffff:127.0.0.1", "fe80::1", "0.0.0.0"):
        assert is_inward(address), address
    assert not is_inward("93.184.216.34")


def test_allowed_origins_are_normalized_and_bare():
    assert normalize_origins("HTTP://Example.COM, https://a.b:8443/") == (
        "http://example.com:80",
        "https://a.b:8443",
    )
    for bad in (["http://a.b/path"], ["ftp://a.b"], ["http://u@a.b"]):
        with pytest.raises(ValueError):
            normalize_origins(bad)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/fake-text", "not_text"),
        ("/redirect-js", "scheme_refused"),
        ("/redirect-userinfo", "userinfo_refused"),
        ("/missing", "http_status"),
    ],
)
def test_hostile_answers_are_refused_without_capture(site, path, code):
    provider = HttpProvider(site.url + "/", [site.url])
    with pytest.raises(WebError) as info:
        provider.fetch(site.url + path)
    assert info.value.code == code
    assert site.count("/marker") == 0 and len(site.requests) == 1


def test_untyped_page_is_sniffed_and_a_stalled_server_times_out(site):
    page = HttpProvider(site.url + "/", [site.url]).fetch(site.url + "/untyped")
    assert page.content_type == "text/html" and "No content type, still html" in page.text
    with pytest.raises(WebError) as info:
        HttpProvider(site.url + "/", [site.url], timeout_s=0.2).fetch(site.url + "/slow")
    assert info.value.code == "network" and "timed out" in info.value.message


def test_one_spelling_per_page_so_the_entry_is_never_offered_again(site):
    store = jev.EvidenceStore()
    kit = WebTools(HttpProvider(site.url.upper().replace("HTTP", "http"), [site.url]), store)
    task = jev.Task([kit], store=store)
    kit.materialize(task)
    assert _open(task, "marker").status == "ok"  # the marker page links to "/"
    urls = [o.value for o in task.domain("web.open_link", "link", {})]
    assert site.url + "/" not in urls and "index" not in {
        o.id for o in task.domain("web.open_link", "link", {})
    }
    assert site.count("/") == 1
