"""Redaction: known secrets and unmistakable token formats, deep, and nothing else."""

from __future__ import annotations

import pytest

from kernel.store.redact import REDACTED, Redactor


def test_known_secrets_are_replaced_everywhere_in_a_string():
    r = Redactor(["s3cr3t-value", "other-secret"])
    assert r.text("a s3cr3t-value b s3cr3t-valueother-secret") == (
        f"a {REDACTED} b {REDACTED}{REDACTED}"
    )


def test_short_and_empty_values_are_ignored():
    r = Redactor(["abc", "", "12345"])
    r.add(None, "  ")
    assert r.text("abc 12345 abcdef") == "abc 12345 abcdef"
    assert r.secrets == frozenset()


def test_secrets_are_stripped_of_surrounding_whitespace():
    r = Redactor(["  key-from-a-file\n"])
    assert r.text("x key-from-a-file y") == f"x {REDACTED} y"


def test_the_longest_secret_wins():
    r = Redactor(["secret", "secret-and-more"])
    assert r.text("secret-and-more") == REDACTED


def test_add_rebuilds_the_pattern():
    r = Redactor()
    assert r.text("late-secret") == "late-secret"
    r.add("late-secret")
    assert r.text("late-secret") == REDACTED


def test_regex_metacharacters_in_secrets_are_literal():
    r = Redactor(["a.b*c+d?(e)"])
    assert r.text("a.b*c+d?(e) axbbbcd") == f"{REDACTED} axbbbcd"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefghijklmnopqrstuvwxyz012345 end", f"key {REDACTED} end"),
        ("sk-proj-Abc_def-GHIjklmnopqrstuvwx", REDACTED),
        ("ghp_" + "a1B2" * 9, REDACTED),
        ("github_pat_" + "x" * 40, REDACTED),
        ("xoxb-1234567890-abcdef", REDACTED),
        ("id AKIAIOSFODNN7EXAMPLE.", f"id {REDACTED}."),
        (
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.123",
            f"Authorization: Bearer {REDACTED}",
        ),
    ],
)
def test_token_formats_are_replaced_without_being_told(text, expected):
    assert Redactor().text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "sk-short",
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "Bearer short",
        "the task-list and desk-top",
        "AKIA lowercase akiaiosfodnn7example",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert Redactor(["unrelated-secret"]).text(text) == text


def test_value_is_deep_and_does_not_mutate_its_input():
    r = Redactor(["hunter2hunter2"])
    original = {
        "a": ["x hunter2hunter2", {"hunter2hunter2": ("hunter2hunter2", 3)}],
        "n": 1.5,
        "none": None,
        "flag": True,
    }
    out = r.value(original)
    assert out == {
        "a": [f"x {REDACTED}", {REDACTED: (REDACTED, 3)}],
        "n": 1.5,
        "none": None,
        "flag": True,
    }
    assert original["a"][0] == "x hunter2hunter2"


def test_a_big_output_with_many_secrets_none_present_is_unchanged():
    """(Its speed is measured by bench/redact.py, not asserted here.)"""
    r = Redactor([f"secret-number-{i:04d}" for i in range(50)])
    text = "ordinary tool output line with nothing secret in it\n" * 2000  # ~100 KB
    assert r.text(text) == text


def test_one_marker_everywhere_and_one_redaction_per_side():
    """One marker (protocol/secrets.py): the worker side's and jev_harness's redactions use it,
    and no other product module spells a marker of its own (issue 10)."""
    import ast
    from pathlib import Path

    from jev_harness.text import REDACTED as LIBRARY_MARKER
    from jev_harness.text import scrub
    from protocol.secrets import REDACTED as MARKER
    from workers.redact import redact

    assert REDACTED == MARKER == LIBRARY_MARKER
    token = "ghp_" + "a" * 36
    assert redact(f"k=secret-1 {token}", "secret-1") == f"k={MARKER} {MARKER}"
    assert scrub("a secret-1 b", ["secret-1", ""]) == f"a {MARKER} b"
    root = Path(__file__).resolve().parent.parent
    homes = {"protocol/secrets.py", "jev_harness/text.py"}
    others = []
    for package in ("kernel", "protocol", "host", "workers", "cli", "acp_server", "jev_harness"):
        for path in (root / package).rglob("*.py"):
            name = str(path.relative_to(root))
            literals = [
                node.value
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
            ]
            if name not in homes and any(
                "[redacted]" in v.lower() for v in literals if len(v) < 40
            ):
                others.append(name)
    assert not others, others
