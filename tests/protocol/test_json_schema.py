"""Issue 34 item 4: `jmp --json-schema`, the published contract of the `--json` stream.

It is generated from protocol/ (protocol/json_schema.py) and kept in docs/ (the generated-docs
test keeps docs/jmp-json.schema.json current); every `--json` line any test reads validates
against it (tests/support/cli.py `check_line`). Here: the command prints it, it is a valid
2020-12 schema naming every kind, it refuses what the contract refuses, and every kind and
data field it names is in CONTRACT.md's table or named in the CHANGELOG (each additive change
of the stream is).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator

from protocol.events import DATA_TYPES, TRANSIENT_KINDS
from protocol.json_schema import schema, text
from tests.support.cli import ROOT, check_line

SID = "0123456789abcdef0123456789abcdef"


def test_jmp_prints_the_schema_of_every_line_kind() -> None:
    """Failed before: `--json-schema` was a usage error."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "--json-schema"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == text() == (ROOT / "docs" / "jmp-json.schema.json").read_text()
    printed = json.loads(done.stdout)
    Draft202012Validator.check_schema(printed)
    kinds = {d["$ref"].removeprefix("#/$defs/line.") for d in printed["oneOf"]}
    assert kinds == {*DATA_TYPES, "result", "sessions", "verified"}


def _line(kind: str, data: dict[str, object], **envelope: object) -> dict[str, object]:
    line: dict[str, object] = {"version": 1, "session_id": SID, "seq": 3, "time": 1.5}
    return {**line, "kind": kind, "data": data, **envelope}


GOOD = [
    _line("tool_finished", {"call_id": "c1", "tool": "bash", "status": "ok", "exit_code": 0}),
    _line("model_progress", {"stage": "generate", "characters": 12}, seq=None),
    _line("final", {"status": "completed", "summary": "done", "later": "a field added later"}),
    _line("result", {"session_id": None, "status": "error", "summary": "x", "session_dir": None},
          session_id=None, seq=None),
]  # fmt: skip
BAD = [
    (_line("tool_finished", {"call_id": "c1", "tool": "bash", "status": "fine"}), "status"),
    (_line("final", {"status": "completed", "summary": "x"}, seq=None), "persisted: a seq"),
    (_line("model_progress", {"stage": "generate", "characters": 1}), "transient: seq null"),
    (_line("user", {"text": "hi"}, version=2), "another version"),
    (_line("no_such_kind", {}), "a kind of no version"),
    (_line("user", {"text": "hi"}, session_id="../etc"), "no session id"),
    (_line("route", {"choice": "bash"}), "required fields"),
]


@pytest.mark.parametrize("line", GOOD, ids=lambda line: str(line["kind"]))
def test_what_the_contract_allows_validates(line: dict[str, object]) -> None:
    try:
        check_line(line)
    except AssertionError as exc:
        pytest.fail(f"a line the contract allows is refused: {exc}")


@pytest.mark.parametrize(("line", "why"), BAD, ids=[why for _, why in BAD])
def test_what_the_contract_refuses_does_not(line: dict[str, object], why: str) -> None:
    with pytest.raises(AssertionError, match="breaks `jmp --json-schema`"):
        check_line(line)


def test_transient_kinds_are_the_protocols() -> None:
    defs = schema()["$defs"]
    for kind in DATA_TYPES:
        seq = defs[f"line.{kind}"]["properties"]["seq"]
        assert (seq == {"type": "null"}) == (kind in TRANSIENT_KINDS), kind


def test_every_kind_and_field_is_in_the_contract_or_named_in_the_changelog() -> None:
    """An additive change of the stream (a kind, a data field) is named in docs/CHANGELOG.md as
    `name` (CONTRACT.md section 5's table and HARNESS.md section 5 are version 1's baseline)."""
    contract = (ROOT / "docs" / "CONTRACT.md").read_text()
    changelog = (ROOT / "docs" / "CHANGELOG.md").read_text()
    named = set(re.findall(r"`([a-z][a-z_0-9]*)`", changelog))
    harness = (ROOT / "docs" / "HARNESS.md").read_text()
    table = contract[contract.index("\n## 5.") : contract.index("\n## 6.")]
    table += harness[harness.index("\n## 5.") : harness.index("\n## 6.")]
    words = re.findall(r"[a-z][a-z_0-9]*", table)
    baseline = {*words, *(f"{a}_{b}" for a, b in itertools.pairwise(words))}
    defs = schema()["$defs"]
    missing = []
    for kind, cls in DATA_TYPES.items():
        if kind not in baseline and kind not in named:
            missing.append(kind)
        for field in defs[cls.__name__]["properties"]:
            if field not in baseline and field not in named:
                missing.append(f"{kind}.{field}")
    assert not missing, f"name these in docs/CHANGELOG.md: {missing}"
