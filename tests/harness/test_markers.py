"""`markers` as the seeds write them: {category label: marker}; a list still accepted
(HARNESS.md section 2). Both example scripts label records by the category, and
markers_verifier checks each category's marker in that category's records."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import jev_harness as jev

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_markers_by_label_takes_a_mapping_a_list_or_one_string():
    assert jev.markers_by_label({"requirements": "REQ-7"}) == {"requirements": "REQ-7"}
    assert jev.markers_by_label(["A-1", "B-2"]) == {"A-1": "A-1", "B-2": "B-2"}
    assert jev.markers_by_label("A-1") == {"A-1": "A-1"}
    for bad, says in [
        ({}, "markers is empty"),
        ([], "markers is empty"),
        (7, "markers must map each category label to its marker"),
        ({"": "x"}, "a category label must be a non-empty string"),
        ({"req": 5}, r"markers\['req'\]: the marker must be a non-empty string"),
        (["ok", " "], r"markers\[' '\]: the marker must be"),
    ]:
        with pytest.raises(ValueError, match=says):
            jev.markers_by_label(bad)


def test_a_mapping_verifier_checks_each_categorys_marker_in_its_own_records():
    verify = jev.markers_verifier({"requirements": "REQ-7", "design": "DES-2"})
    req = {"label": "requirements", "quote": "see REQ-7 here"}
    des = {"label": "design", "quote": "DES-2 is the design"}
    assert verify([req, des])
    assert not verify([req])  # a category with no record
    # The marker quoted under another category does not count (2b9f963 checked the labels:
    # "requirements" in some quote, never "REQ-7").
    assert not verify([req, {"label": "requirements", "quote": "DES-2"}])
    assert not verify([{"label": "x", "quote": "requirements design"}])


def test_a_list_verifier_still_wants_every_marker_in_some_quote():
    verify = jev.markers_verifier(["REQ-7", "DES-2"])
    assert verify([{"label": "a", "quote": "REQ-7 and DES-2"}])
    assert not verify([{"label": "a", "quote": "REQ-7"}])


@pytest.mark.parametrize("name", ["research_task", "workspace_task"])
def test_both_examples_label_records_by_category(name, tmp_path):
    inputs = {
        "research_task": {"url": "http://127.0.0.1:9/", "allowed_origins": ["http://127.0.0.1:9"]},
        "workspace_task": {"root": str(tmp_path), "queries": ["q"]},
    }[name]
    task = _example(name).workflow.build(
        {**inputs, "markers": {"requirements": "REQ-7"}, "output": "out.json"}
    )
    assert list(task.labels) == ["requirements"]
    assert task.record_checks["requirements"]("a REQ-7 passage")
    assert not task.record_checks["requirements"]("requirements, no marker")
    listed = _example(name).workflow.build({**inputs, "markers": ["REQ-7"], "output": "o.json"})
    assert list(listed.labels) == ["REQ-7"]
