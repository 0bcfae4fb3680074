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


def test_one_redactor_on_every_side():
    """One redactor (protocol/redact.py) with one rule set: what the workers and jev_harness
    redact is redacted as the kernel's log redacts it (the counts: test_architecture_counts)."""
    from jev_harness.task import Task
    from protocol.redact import redact
    from protocol.secrets import REDACTED as MARKER

    assert REDACTED == MARKER
    token = "ghp_" + "a" * 36
    expected = Redactor(["secret-1"]).text(f"k=secret-1 {token} 12345")
    assert expected == f"k={MARKER} {MARKER} 12345"
    assert redact(f"k=secret-1 {token} 12345", "secret-1", ["12345", ""]) == expected
    task = Task()
    task.configure("goal", secrets=["secret-1"])
    assert task.redact(f"k=secret-1 {token} 12345") == expected  # token formats too, now
    with pytest.raises(ValueError, match="shorter than 6 characters"):
        Task().configure("goal", secrets=["secret-1", "12345"])  # never passed unredacted


# --- JMP_DEBUG=1: a traceback is printed like everything else, redacted and inert ----------

KEY = "tsk-debug-traceback-key-0123456789"


def _boom(*_args, **_kwargs):
    secret_in_a_local = KEY  # noqa: F841 (a frame's source line shows it in the traceback)
    raise RuntimeError(f"boom with {KEY} and \x1b]0;title\x07")


def _check_debug_output(err: str) -> None:
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError" in err
    assert KEY not in err
    assert REDACTED in err
    assert "\x1b" not in err and "\\x1b" in err


@pytest.fixture
def debug_with_a_key(monkeypatch):
    monkeypatch.setenv("JMP_DEBUG", "1")
    monkeypatch.setenv("TYPESAFE_API_KEY", KEY)


def test_the_cli_debug_traceback_is_redacted(debug_with_a_key, monkeypatch, capsys, tmp_path):
    import cli.main
    import cli.run

    monkeypatch.setattr(cli.run, "run", _boom)
    code = cli.main.main(["--json", "--sessions-dir", str(tmp_path), "a task"])
    assert code == 2
    out, err = capsys.readouterr()
    _check_debug_output(err)
    assert KEY not in out and "internal error: RuntimeError" in out


def test_the_harness_cli_debug_traceback_is_redacted(debug_with_a_key, monkeypatch, capsys):
    import jev_harness.cli.main as harness_main

    monkeypatch.setitem(harness_main.COMMANDS, "run", _boom)
    code = harness_main.main(["run", "task.py", "--goal", "g", "--inputs", "{}", "--json"])
    assert code == 2
    out, err = capsys.readouterr()
    assert KEY not in out
    _check_debug_output(err)


def test_the_acp_debug_traceback_is_redacted(debug_with_a_key, capsys):
    from acp_server.errors import as_request_error
    from kernel.store.redact import environment_secrets

    try:
        _boom()
    except RuntimeError as exc:
        error = as_request_error(exc, Redactor(environment_secrets()))
    assert KEY not in str(error)
    _check_debug_output(capsys.readouterr().err)
