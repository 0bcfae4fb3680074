"""Issue 9 units behind the CLI tests: Jev answer rules, UTF-8 and workspace checks, admission."""

from __future__ import annotations

import math

import pytest

from kernel.context.policy import ContextPolicy
from kernel.errors import UsageError
from kernel.loop import admit
from kernel.store.workspace import check_workspace, utf8_problem
from kernel.supervision.jev_answer import problem

OFFERED = ["read", "write", "done"]
GOOD = {"read": 0.1, "write": 0.8, "done": 0.1}


def test_a_valid_answer_passes_and_rounding_is_tolerated() -> None:
    assert problem(OFFERED, "write", 0.7, GOOD) == ""
    rounded = {"read": 0.33, "write": 0.33, "done": 0.33}  # sums to 0.99, ties
    assert problem(OFFERED, "done", 0.0, rounded) == ""


@pytest.mark.parametrize(
    ("choice", "confidence", "probabilities", "named"),
    [
        ("write", 5.0, GOOD, "confidence is 5.0"),
        ("write", math.nan, GOOD, "confidence is nan"),
        ("write", -0.1, GOOD, "confidence is -0.1"),
        ("write", 0.7, {**GOOD, "read": math.inf}, "'read' the probability inf"),
        ("write", 0.7, {**GOOD, "read": -0.2}, "'read' the probability -0.2"),
        ("write", 0.7, {**GOOD, "read": math.nan}, "probability nan"),
        ("write", 0.7, {"read": 0.9, "write": 0.9, "done": 0.9}, "sum to 2.7"),
        ("write", 0.7, {"read": 0.1, "write": 0.1, "done": 0.1}, "sum to 0.3"),
        ("read", 0.7, GOOD, "'write' is more probable"),
        ("fly", 0.7, GOOD, "'fly', which was not offered"),
        ("write", 0.7, {**GOOD, "fly": 0.0}, "unoffered label 'fly'"),
        ("write", 0.7, {"write": 0.9, "done": 0.1}, "no probability for offered 'read'"),
    ],
)
def test_each_broken_rule_is_named(
    choice: str, confidence: float, probabilities: dict[str, float], named: str
) -> None:
    assert named in problem(OFFERED, choice, confidence, probabilities)


def test_the_extra_label_message_names_only_the_extra_label() -> None:
    text = problem(OFFERED, "write", 0.7, {**GOOD, "zz": 0.0})
    assert "'zz'" in text and "'write'" not in text and "'read'" not in text


def test_utf8_problems_are_located() -> None:
    assert utf8_problem("café ✓") == ""
    escaped = b"ab\xc3\xa9\xff".decode("utf-8", "surrogateescape")
    assert utf8_problem(escaped) == "invalid UTF-8 byte 0xff at byte offset 4"
    assert utf8_problem("x\ud800") == "a lone surrogate U+D800 at character 1"


@pytest.mark.parametrize("path", ["", "/", "/usr", "/etc/", "/sys/kernel", "/proc/self"])
def test_system_workspaces_are_refused(path: str) -> None:
    with pytest.raises(UsageError):
        check_workspace(path)


def test_a_project_below_a_system_dir_is_fine(tmp_path: object) -> None:
    assert str(check_workspace(str(tmp_path))) == str(tmp_path)


def test_admission_limit_is_exact_and_lone_surrogates_are_replaced() -> None:
    policy = ContextPolicy()
    limit, reserve = admit.request_limit(policy, [], "x")
    assert limit + reserve == policy.jev_bytes
    admit.check(policy, [], "x" * limit)  # the limit itself is admitted
    with pytest.raises(UsageError, match=f"at most {limit:,} bytes"):
        admit.check(policy, [], "x" * (limit + 1))
    from protocol.text import clean

    assert clean("a\udcffb\ud800") == "a\\xffb\ufffd"  # protocol/text.py, the one rule
