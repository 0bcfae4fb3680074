"""Artifacts: atomic, redacted, never replaced, and served only from inside the session."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kernel.errors import ArtifactRefused, StorageError
from kernel.store.artifacts import Artifacts
from kernel.store.redact import Redactor
from protocol.events import UserData

SECRET = "artifact-secret-99"


@pytest.fixture
def artifacts(short_tmp: Path) -> Artifacts:
    session = short_tmp / "session"
    (session / "artifacts").mkdir(parents=True)
    (session / "events.jsonl").write_text("{}\n")
    return Artifacts(session, Redactor([SECRET]))


def test_json_round_trip_with_structs_and_redaction(artifacts):
    rel = artifacts.write_json("call-1-request.json", {"user": UserData(text=SECRET), "n": [1]})
    assert rel == "artifacts/call-1-request.json"
    assert artifacts.read_json(rel) == {"user": {"text": "[REDACTED]"}, "n": [1]}
    assert SECRET not in (artifacts.root / rel).read_text()


def test_text_round_trip_with_redaction(artifacts):
    rel = artifacts.write_text("out.txt", f"line 1\n{SECRET}\nünï\n")
    assert artifacts.read_text(rel) == "line 1\n[REDACTED]\nünï\n"


def test_a_taken_name_gets_a_counter_and_the_first_stays(artifacts):
    first = artifacts.write_text("out.txt", "one")
    second = artifacts.write_text("out.txt", "two")
    third = artifacts.write_text("out.txt", "three")
    noext = [artifacts.write_text("raw", "a"), artifacts.write_text("raw", "b")]
    assert (first, second, third) == (
        "artifacts/out.txt",
        "artifacts/out-2.txt",
        "artifacts/out-3.txt",
    )
    assert noext == ["artifacts/raw", "artifacts/raw-2"]
    assert artifacts.read_text(first) == "one"


def test_writes_leave_no_temporary_files(artifacts, monkeypatch):
    artifacts.write_json("a.json", {"x": 1})

    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    # An environment error names the operation and the path (issue 9, item 15).
    with pytest.raises(StorageError, match=r"cannot write the artifact .*b\.txt: No space.*ENOSPC"):
        artifacts.write_text("b.txt", "x")
    assert sorted(p.name for p in artifacts.directory.iterdir()) == ["a.json"]


@pytest.mark.parametrize("name", ["../escape.txt", "sub/file.txt", "/tmp/abs.txt", ".hidden", ""])
def test_names_must_be_plain_file_names(artifacts, name):
    with pytest.raises(ArtifactRefused):
        artifacts.write_text(name, "x")


@pytest.mark.parametrize(
    "rel", ["../outside.txt", "artifacts/../../outside.txt", "/etc/passwd", "", "artifacts/.."]
)
def test_reads_outside_the_session_are_refused(artifacts, rel):
    (artifacts.root.parent / "outside.txt").write_text("secret elsewhere")
    with pytest.raises(ArtifactRefused):
        artifacts.read_text(rel)


def test_symlinks_resolving_outside_are_refused(artifacts):
    outside = artifacts.root.parent / "outside.txt"
    outside.write_text("secret elsewhere")
    (artifacts.directory / "link.txt").symlink_to(outside)
    (artifacts.directory / "dirlink").symlink_to(artifacts.root.parent)
    for rel in ("artifacts/link.txt", "artifacts/dirlink/outside.txt"):
        with pytest.raises(ArtifactRefused, match="outside"):
            artifacts.read_text(rel)
        with pytest.raises(ArtifactRefused):
            artifacts.path(rel)


def test_paths_inside_the_session_are_served(artifacts):
    rel = artifacts.write_text("a.txt", "inside")
    (artifacts.directory / "inner-link.txt").symlink_to(artifacts.root / rel)
    assert artifacts.read_text("artifacts/inner-link.txt") == "inside"
    assert artifacts.read_text("events.jsonl") == "{}\n"
    assert artifacts.path(rel) == (artifacts.root / rel).resolve()
