"""The selection policy and paging (HARNESS.md section 3): pure functions, exact edges."""

from __future__ import annotations

import pytest

from kernel.harness.paging import MAX_OPTIONS, RequestTooLarge, page_options, pages, request_size
from kernel.harness.policy import decide, single_option
from kernel.harness.state import STATE_BYTES, build_state
from protocol.harness import OptionSpec


def test_match_accepts_exactly_055_and_010() -> None:
    d = decide("match", ["a", "b", "c"], "a", {"a": 0.55, "b": 0.45, "c": 0.0})
    assert d.accepted and d.top == 0.55 and d.margin == pytest.approx(0.10)
    d = decide("match", ["a", "b"], "a", {"a": 0.55, "b": 0.45})
    assert d.accepted


def test_match_refuses_just_below_either_edge() -> None:
    low_top = decide("match", ["a", "b", "c"], "a", {"a": 0.5499, "b": 0.2, "c": 0.2501})
    assert not low_top.accepted and low_top.reason == "below_threshold"
    low_margin = decide("match", ["a", "b"], "a", {"a": 0.55, "b": 0.4501})
    assert not low_margin.accepted and low_margin.reason == "below_threshold"
    tight = decide("match", ["a", "b", "c"], "a", {"a": 0.56, "b": 0.4601, "c": 0.0})
    assert not tight.accepted and tight.reason == "below_threshold"  # margin 0.0999


def test_explore_edges() -> None:
    assert decide(
        "explore", ["a", "b", "c", "d"], "a", {"a": 0.30, "b": 0.30, "c": 0.2, "d": 0.2}
    ).accepted
    below = decide(
        "explore", ["a", "b", "c", "d"], "a", {"a": 0.2999, "b": 0.25, "c": 0.25, "d": 0.2001}
    )
    assert not below.accepted
    assert "a 0.30" in below.describe()


def test_confidence_plays_no_part() -> None:
    # Same probabilities, whatever Jev's confidence was: the policy never sees it.
    d = decide("match", ["a", "b"], "a", {"a": 0.9, "b": 0.1})
    assert d.accepted and d.method == "jev"


def test_argmax_mismatch_is_refused_as_inconsistent() -> None:
    d = decide("explore", ["a", "b"], "b", {"a": 0.7, "b": 0.3})
    assert not d.accepted and d.reason == "inconsistent"


def test_label_set_mismatch_is_refused_as_inconsistent() -> None:
    extra = decide("explore", ["a", "b"], "a", {"a": 0.7, "b": 0.2, "z": 0.1})
    missing = decide("explore", ["a", "b", "c"], "a", {"a": 0.7, "b": 0.3})
    unknown_choice = decide("explore", ["a", "b"], "z", {"a": 0.7, "b": 0.3})
    assert all(
        d.reason == "inconsistent" and not d.accepted for d in (extra, missing, unknown_choice)
    )


def test_single_option_is_chosen_in_code() -> None:
    d = single_option("only", "match")
    assert d.accepted and d.method == "single_option" and d.probabilities == {"only": 1.0}


def test_records_keep_the_top_eight_descending() -> None:
    probs = {f"o{i}": (i + 1) / 210 for i in range(20)}
    d = decide("explore", list(probs), "o19", probs)
    assert list(d.probabilities) == [f"o{i}" for i in range(19, 11, -1)]


def _options(n: int, desc: str = "d") -> list[OptionSpec]:
    return [OptionSpec(id=f"p{i}", description=desc) for i in range(n)]


def test_a_domain_that_fits_is_one_page() -> None:
    assert pages(_options(255), fixed=100) == [_options(255)]


def test_more_than_255_options_are_paged_in_order() -> None:
    chunks = pages(_options(600), fixed=100)
    assert [len(c) for c in chunks] == [255, 255, 90]
    assert [o.id for c in chunks for o in c] == [f"p{i}" for i in range(600)]
    labels = page_options(chunks)
    assert [o.id for o in labels] == ["page1", "page2", "page3"]
    assert "p0" in labels[0].description and "p254" in labels[0].description
    assert all(len(o.description) <= 200 for o in labels)


def test_the_request_budget_pages_a_domain_under_255_options() -> None:
    options = _options(200, "x" * 199)  # ~40,000 bytes of descriptions
    state, instructions = "s" * 8000, "i" * 200
    chunks = pages(options, fixed=len(state) + len(instructions))
    assert len(chunks) > 1
    for chunk in chunks:
        assert request_size(state, instructions, chunk) <= 24_000
    assert sum(len(c) for c in chunks) == 200


def test_an_option_that_cannot_fit_is_an_error_not_a_cut() -> None:
    with pytest.raises(RequestTooLarge):
        pages([*_options(2), OptionSpec(id="big", description="é" * 9000)], fixed=8000)


def test_state_is_bounded_and_keeps_the_goal() -> None:
    obs = {"sources": ["x" * 3000 for _ in range(8)], "last_read": {"text": "y" * 1200}}
    state = build_state("find the marker", {"max_steps": 3}, obs)
    assert len(state.encode()) <= STATE_BYTES
    assert '"goal":"find the marker"' in state and '"clipped":true' in state


def test_state_never_raises_on_lone_surrogates() -> None:
    state = build_state("goal", {}, {"name": "bad\udcffname"})
    state.encode("utf-8")


def test_max_options_is_the_question_limit() -> None:
    assert MAX_OPTIONS == 255
