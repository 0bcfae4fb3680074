"""The JSON Schema of every line `--json` prints (`jmp --json`, `jev-harness run --json`), for
the current envelope version: what `jmp --json-schema` prints and docs/jmp-json.schema.json
holds (generated, kept current by a test), built from the types that write the lines.

One definition per line kind: the envelope (docs/CONTRACT.md section 5) with `kind` fixed and `data`
the kind's struct (protocol/events.py, protocol/harness_events.py), and the front ends' own
`result` (protocol/results.py) and `sessions` (protocol/lines.py) lines. A persisted record has
a session id and a `seq` from 1; a transient one (TRANSIENT_KINDS) and a front-end line have
`seq: null`; `jmp --verify --json`'s one line (`verified`) is the one outside the envelope.
Fields a reader does not know are allowed everywhere (readers ignore them), so the
schema describes this version and still accepts a later, additive one; `kind` is closed: a
line of a kind not listed here is not of this version.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import msgspec

from protocol.events import DATA_TYPES, EVENT_VERSION, TRANSIENT_KINDS
from protocol.lines import Line, SessionRow
from protocol.results import RunResult

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SESSION_ID = {"type": "string", "pattern": "^[0-9a-f]{32}$"}


class SessionsData(msgspec.Struct, kw_only=True):
    """`jmp --list --json`: every session, most recent first."""

    sessions: list[SessionRow]


# The envelope's fields in their order: the front ends' own line (protocol/lines.py `Line`) is
# the one place they are spelled; the event log's records have the same (protocol/events.py).
ENVELOPE = tuple(f.name for f in fields(Line))


def _envelope(kind: str, data: dict[str, Any], persisted: bool) -> dict[str, Any]:
    """The envelope, `kind` fixed: a persisted record has a session id, a seq and a time; a
    transient one and a front-end line `seq: null`, the time optional."""
    seq = {"type": "integer", "minimum": 1} if persisted else {"type": "null"}
    session_id = SESSION_ID if persisted else {"anyOf": [SESSION_ID, {"type": "null"}]}
    time = {"type": "number"} if persisted else {"type": ["number", "null"]}
    version = {"const": EVENT_VERSION}
    shapes = (version, session_id, seq, time, {"const": kind}, data)
    return {
        "type": "object",
        "properties": dict(zip(ENVELOPE, shapes, strict=True)),
        "required": [f for f in ENVELOPE if persisted or f != "time"],
    }


# `jmp --session ID --verify --json` (issue 25): its one line, outside the envelope.
VERIFIED = {
    "type": "object",
    "properties": {
        "type": {"const": "verified"},
        "session_id": SESSION_ID,
        "records": {"type": "integer", "minimum": 1},
        "bytes": {"type": "integer", "minimum": 1},
        "ok": {"const": True},
    },
    "required": ["type", "session_id", "records", "bytes", "ok"],
}


def schema() -> dict[str, Any]:
    """The schema (a JSON object): `oneOf` the line kinds, each under `$defs` as `line.KIND`."""
    kinds = [*DATA_TYPES, "result", "sessions"]
    types = [*DATA_TYPES.values(), RunResult, SessionsData]
    refs, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    lines = {}
    for kind, ref in zip(kinds, refs, strict=True):
        persisted = kind in DATA_TYPES and kind not in TRANSIENT_KINDS
        lines[f"line.{kind}"] = _envelope(kind, ref, persisted)
    return {
        "$schema": DIALECT,
        "title": f"jmp --json lines, envelope version {EVENT_VERSION}",
        "description": (
            "Every line that `jmp --json` and `jev-harness run --json` print on stdout: one "
            "JSON object per line, the event envelope with `kind` naming the line. Generated "
            "from protocol/ (`jmp --json-schema`); see docs/EVENTS.md for what each field means."
        ),
        "oneOf": [{"$ref": f"#/$defs/line.{kind}"} for kind in [*kinds, "verified"]],
        "$defs": {**lines, "line.verified": VERIFIED, **components},
    }


def text() -> str:
    """The schema as `jmp --json-schema` prints it: indented, keys in a stable order."""
    import json

    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"
