"""Event records: stored v1 logs decode forever, and docs/EVENTS.md matches the code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernel.store.event_log import EventLog
from kernel.store.session import Session
from protocol.codec import UnsupportedVersion, decode_event, encode_event
from protocol.docgen import generate
from protocol.events import DATA_TYPES, TRANSIENT_KINDS

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "events" / "v1"


def test_events_md_is_generated_from_the_code():
    assert (ROOT / "docs" / "EVENTS.md").read_text() == generate(), "run `make docs`"


def test_the_generated_doc_names_every_kind_and_field():
    text = generate()
    for kind, cls in DATA_TYPES.items():
        assert f"### `{kind}`" in text
        for field in cls.__struct_fields__:
            assert f"| {field} |" in text, (kind, field)
    assert "### `model_progress` (transient)" in text


@pytest.mark.parametrize("path", sorted(DATA.glob("*.jsonl")), ids=lambda p: p.name)
def test_stored_v1_records_decode_and_reencode(path):
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        event = decode_event(line)
        assert event.version == 1, number
        if event.known:
            # a record written by this build reads back equal
            assert decode_event(encode_event(event)) == event, number


def test_stored_v1_logs_cover_every_kind():
    kinds = {
        json.loads(line)["kind"]
        for path in DATA.glob("*.jsonl")
        for line in path.read_bytes().splitlines()
    }
    assert set(DATA_TYPES) <= kinds


def test_basic_log_is_a_valid_session_log(short_tmp):
    events = EventLog(DATA / "basic.jsonl").load()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert not {e.kind for e in events} & TRANSIENT_KINDS
    home = short_tmp / "home"
    sid = events[0].session_id
    (home / sid).mkdir(parents=True)
    shutil.copy(DATA / "basic.jsonl", home / sid / "events.jsonl")
    with Session.open(home, sid) as s:
        assert s.status == "compacted" and len(s.events) == len(events)
        assert str(s.workspace) == "/home/dev/projects/calc"


def test_unknown_kinds_and_fields_are_skipped_and_version_2_refused():
    line = json.loads((DATA / "basic.jsonl").read_bytes().splitlines()[1])
    odd = {**line, "kind": "future_kind", "data": {"x": 1}, "extra": 1}
    assert decode_event(json.dumps(odd)).data == {"x": 1}
    grown = {**line, "data": {**line["data"], "added_later": [1]}}
    assert decode_event(json.dumps(grown)).data.text == line["data"]["text"]
    with pytest.raises(UnsupportedVersion, match="version 2"):
        decode_event(json.dumps({**line, "version": 2}))
