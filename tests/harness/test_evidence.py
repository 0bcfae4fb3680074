"""The evidence store and the evidence task: bounds, digests, passages, gating, receipts."""

from __future__ import annotations

import hashlib

import pytest

import jev_harness as jev
from jev_harness.evidence_store import MAX_PASSAGE_CHARS, UnknownReference, split_passages

PROSE = "\n\n".join(
    f"Paragraph {i}. " + " ".join(f"word{i}x{j}" for j in range(40)) for i in range(12)
)


def test_store_describe_digest_and_summary():
    store = jev.EvidenceStore()
    ref = store.put("héllo world\n", "notes.txt", {"path": "notes.txt"})
    again = store.put("héllo world\n", "notes.txt")
    assert ref != again  # capture-specific
    info = store.describe(ref)
    assert info["digest"] == hashlib.sha256("héllo world\n".encode()).hexdigest()
    assert info["length"] == 12 and info["source"] == "notes.txt"
    assert info["metadata"] == {"path": "notes.txt"}
    assert "héllo world" in info["summary"] and len(info["summary"]) <= 200
    assert [d["ref"] for d in store.references()] == [ref, again]
    with pytest.raises(UnknownReference):
        store.describe("c99")


def test_store_read_bounds():
    store = jev.EvidenceStore()
    ref = store.put("a" * 5000, "big")
    assert len(store.read(ref)) == 1200
    assert store.read(ref, 4990, 1200) == "a" * 10
    with pytest.raises(ValueError, match="1200"):
        store.read(ref, 0, 1201)
    with pytest.raises(ValueError):
        store.read(ref, -1)


def test_lone_surrogates_are_stored_encodable():
    store = jev.EvidenceStore()
    ref = store.put("bad \udcff byte", "x")
    store.read(ref).encode("utf-8")


def test_passages_are_bounded_and_lie_inside_a_window():
    store = jev.EvidenceStore()
    long_line = "z" * 1500  # one word longer than a passage: cut hard
    ref = store.put(PROSE + "\n" + long_line, "prose")
    passages = store.passages(ref)
    assert passages and all(0 < p.end - p.start <= MAX_PASSAGE_CHARS for p in passages)
    text = store.read(ref, 0, 0)  # empty read is allowed
    assert text == ""
    windows = store.windows(ref)
    assert windows[-1][1] == len(PROSE) + 1 + 1500
    for p in passages:
        assert any(s <= p.start and p.end <= e for s, e in windows)
        assert store.text(p) == store.text(p).strip()


def test_pages_hold_whole_passages_within_1200_chars():
    store = jev.EvidenceStore()
    ref = store.put(PROSE, "prose")
    pages = store.pages(ref)
    assert len(pages) > 1
    assert all(e - s <= 1200 for s, e in pages)
    for p in store.passages(ref):
        assert sum(s <= p.start and p.end <= e for s, e in pages) == 1


def test_chunk_options_describe_source_and_opening_words():
    store = jev.EvidenceStore()
    ref = store.put("first line here\n\nsecond paragraph", "doc.md")
    options = store.chunk_options(ref)
    assert [o.id for o in options] == [f"{ref}.p1", f"{ref}.p2"]
    assert "doc.md" in options[1].description and "second paragraph" in options[1].description
    assert store.text(options[1].value) == "second paragraph"
    assert len(store.chunk_options()) == 2


def test_split_passages_merges_lines_within_a_paragraph():
    assert split_passages("a\nb\n\nc") == [(0, 3), (5, 6)]
    assert split_passages("   \n\n") == []
