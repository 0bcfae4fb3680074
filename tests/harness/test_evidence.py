"""The evidence store and the evidence task: bounds, digests, passages, gating, receipts."""

from __future__ import annotations

import hashlib
import json

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
    text = store.read(ref)
    assert text.encode("utf-8") and text.startswith("bad ") and text.endswith(" byte")


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


def _task(store, tmp_path, markers=("ALPHA-7",), output=None, checks=None):
    labels = list(markers)
    return jev.EvidenceTask(
        store,
        [],
        labels,
        checks or {m: jev.contains(m) for m in markers},
        output or tmp_path / "out" / "report.json",
        jev.markers_verifier(markers),
    )


def _names(task):
    return [t.name for t in task.offered_tools()]


def _read_all_windows(task, ref):
    while ref in [o.id for o in task.domain("read_evidence", "ref", {})]:
        task.operate(
            "read_evidence",
            task.resolve(
                "read_evidence",
                {
                    "ref": ref,
                    "window": task.domain(
                        "read_evidence", "window", {"ref": jev.Option(ref, "", ref)}
                    )[0].id,
                },
            ),
        )


def test_record_gating_needs_a_read_passing_passage(tmp_path):
    store = jev.EvidenceStore()
    filler = "\n\n".join(f"filler line {i} " + "x" * 50 for i in range(40))
    ref = store.put(filler + "\n\nThe marker ALPHA-7 is here.\n", "doc.txt")
    task = _task(store, tmp_path)
    assert task.tool_selection == "explore"
    assert _names(task) == ["read_evidence", "evidence_page"]
    first = task.resolve("read_evidence", {"ref": ref, "window": "w1"})
    task.operate("read_evidence", first)
    assert "record_evidence" not in _names(task)  # the marker lies beyond the first window
    _read_all_windows(task, ref)
    assert "record_evidence" in _names(task)
    assert [o.id for o in task.domain("record_evidence", "label", {})] == ["ALPHA-7"]
    passages = task.domain(
        "record_evidence", "passage", {"label": jev.Option("ALPHA-7", "", "ALPHA-7")}
    )
    assert len(passages) == 1 and "ALPHA-7" in store.text(passages[0].value)


def test_truthy_non_bool_check_does_not_pass(tmp_path):
    store = jev.EvidenceStore()
    ref = store.put("ALPHA-7 right here", "doc.txt")
    task = _task(store, tmp_path, checks={"ALPHA-7": lambda text: "yes"})
    task.operate("read_evidence", task.resolve("read_evidence", {"ref": ref, "window": "w1"}))
    assert "record_evidence" not in _names(task)


def _complete_run(task, ref):
    task.operate("read_evidence", task.resolve("read_evidence", {"ref": ref, "window": "w1"}))
    label = task.domain("record_evidence", "label", {})[0]
    passage = task.domain("record_evidence", "passage", {"label": label})[0]
    task.operate("record_evidence", {"label": label, "passage": passage})
    assert _names(task)[-1] == "save_report"
    return task.operate("save_report", {})


def test_save_report_receipt_and_tamper(tmp_path):
    store = jev.EvidenceStore()
    ref = store.put("intro\n\nThe marker ALPHA-7 is here.\n", "doc.txt")
    task = _task(store, tmp_path)
    task.configure("find the marker")
    assert not task.complete()
    assert task.receipt()["exists"] is False
    outcome = _complete_run(task, ref)
    assert outcome.status == "ok" and outcome.data["verdict"] is True
    path = tmp_path / "out" / "report.json"
    receipt = outcome.receipt
    assert receipt["path"] == str(path) and receipt["exists"] and receipt["match"]
    assert receipt["record_count"] == 1 and receipt["sources"] == ["doc.txt"]
    assert receipt["digest"] == hashlib.sha256(path.read_bytes()).hexdigest()
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["goal"] == "find the marker"
    assert doc["records"][0]["quote"] == "The marker ALPHA-7 is here."
    assert {"label", "quote", "source", "ref"} <= set(doc["records"][0])
    assert task.complete()
    assert "save_report" not in _names(task)  # nothing new to save
    assert list(path.parent.iterdir()) == [path]  # no temp file left beside it
    path.write_text(path.read_text().replace("is here", "was here"))
    assert task.artifact_receipt()["match"] is False
    assert not task.complete()


def test_report_redacts_known_secrets(tmp_path):
    store = jev.EvidenceStore()
    ref = store.put("ALPHA-7 with key sk-SECRETVALUE99\n", "doc.txt")
    task = _task(store, tmp_path)
    task.configure("goal sk-SECRETVALUE99", secrets=["sk-SECRETVALUE99"])
    _complete_run(task, ref)
    data = (tmp_path / "out" / "report.json").read_text()
    assert "sk-SECRETVALUE99" not in data and "[REDACTED]" in data
    assert task.complete()  # the comparison is with the redacted report


def test_relative_output_is_under_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = jev.EvidenceStore()
    ref = store.put("ALPHA-7\n", "doc.txt")
    task = _task(store, tmp_path, output="report.json")
    assert _complete_run(task, ref).receipt["path"] == str(tmp_path / "report.json")


def test_output_that_is_a_directory_is_an_error_outcome(tmp_path):
    store = jev.EvidenceStore()
    ref = store.put("ALPHA-7\n", "doc.txt")
    (tmp_path / "out").mkdir()
    task = _task(store, tmp_path, output=tmp_path / "out")
    outcome = _complete_run(task, ref)
    assert outcome.status == "error" and "directory" in outcome.summary
    assert not task.complete()


def test_evidence_page_reads_whole_passages(tmp_path):
    store = jev.EvidenceStore()
    ref = store.put(PROSE + "\n\nALPHA-7 at the end.", "prose")
    task = _task(store, tmp_path)
    ref_option = jev.Option(ref, "", ref)
    pages = task.domain("evidence_page", "page", {"ref": ref_option})
    last = pages[-1]
    outcome = task.operate("evidence_page", {"ref": ref_option, "page": last})
    assert outcome.text.endswith("ALPHA-7 at the end.") and len(outcome.text) <= 1200
    assert "record_evidence" in _names(task)
    assert last.id not in [o.id for o in task.domain("evidence_page", "page", {"ref": ref_option})]
    obs = task.observe()
    assert obs["last_read"]["text"] == outcome.text and obs["counts"]["captures"] == 1


def test_labels_need_checks():
    with pytest.raises(ValueError, match="without a check"):
        jev.EvidenceTask(jev.EvidenceStore(), [], ["a"], {}, "r.json", lambda records: True)
