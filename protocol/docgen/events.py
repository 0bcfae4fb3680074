"""docs/EVENTS.md, generated from protocol/events.py (`make docs`)."""

from __future__ import annotations

import sys

import msgspec

from protocol import events
from protocol.docgen.fields import doc_of, field_comments, field_table

INTRO = """\
# Events

<!-- Generated from protocol/events.py by protocol/docgen/events.py. Do not edit by hand:
     run `make docs`. A test fails when this file and the code disagree. -->

Every session keeps an append-only log, `SESSIONS/ID/events.jsonl`: one JSON object per line,
redacted before it is written. With `--json` the CLI prints every persisted event on stdout
once it is durable (see `seq`), the transient events, and last one `result` line (or one
`sessions` line for `--list`). `jmp --json-schema` prints the JSON Schema of every line kind
(generated from the same types: [jmp-json.schema.json](jmp-json.schema.json)).

## Envelope

```json
{"version":1,"session_id":"<32 hex>","seq":12,"time":1789670000.0,"kind":"tool_finished","data":{}}
```

| field | type | meaning |
|---|---|---|
| version | int | record format `%(version)d`; readers refuse another version with a clear error |
| session_id | str | 32 lowercase hex digits (`uuid4().hex`), the session directory's name |
| seq | int or null | 1 for `session`, then +1 per record, no gaps (see below); null: transient |
| time | float or null | Unix time (seconds) when the record was written |
| kind | str | one of the kinds below; readers skip kinds they do not know |
| data | object | the kind's fields; readers ignore fields they do not know |

Rules that hold for every log:

- **Durable before visible.** A record is printed, handed to `on_event` or sent to an ACP
  client only once an fsync of the log covered it (and of every artifact it names), so a
  printed `seq` is never lost to a crash or a power cut, never changes and is never used again
  for another record: it is safe to dedup and replay by. The records of one step share one
  fsync: they are written and fsynced by the session's commit thread a few milliseconds after
  they were appended, in seq order, and every record of a run is out before its `result` line.
  A record that was never printed may be lost to a power cut, and then its `seq` is given to
  the next record. After a failed write or fsync nothing more is printed or written: the run
  stops with an error naming the file.
- A line is written with a single `write()` including its newline. `tool_started`,
  `tool_uncertain` and the `session` record are fsynced before anything else happens (before
  the tool can have any effect). `run_started` is fsynced, with the request (`user`, and the
  harness's `task`) before it, before the run's first step: a run killed from then on is
  found as a killed run (`running`, settled `blocked` or resumed), never as a session with no
  request.
- A torn last line (a write cut short by a crash) is moved to `events.jsonl.torn-<time>` beside
  the log and removed, under the session lock, and an `error` record with stage `recall`
  (reading the session back) and error_class `TornRecord` says so. The archive is named only
  once that record is durable (until then it is `events.jsonl.torn-<time>.pending`, which
  the next open finishes after a power cut): every archive has exactly one such record. A
  malformed complete or interior line, a seq gap or another version stops the open (exit 2)
  and nothing is written.
- Transient kinds (%(transient)s) are printed with `seq: null` and never reach the log.

## CLI messages (stdout only, never in the log)

- `result`, the last line of a run: `data` is `{session_id, status, summary, session_dir}`,
  status one of completed, needs_input, blocked, cancelled, error, compacted. Exit status 0
  goes with completed and compacted, 2 with the rest.
  `jev-harness run --json` prints the same line with one more field, `artifact`: the
  artifact receipt `{path, exists, match, record_count, digest, sources, verdict}`, or null.
- `sessions`, the one line of `--list --json`: `data.sessions` is a list of `{session_id,
  workspace, status, last_activity, events, title}`, most recent first. `status` is the last
  `final` record's status, else `new` (no request yet), `running` (a request after the last
  `final`: running now, or killed) or `unreadable`; `events` counts records; `title` is the
  first request, on one line, cut at 80 characters.

Both have `seq: null` and `session_id` null when no session is involved.

## Kinds
"""


def generate() -> str:
    """The whole of docs/EVENTS.md."""
    comments: dict[str, dict[str, str]] = {}  # the kinds live in more than one module
    for module in {sys.modules[cls.__module__] for cls in events.DATA_TYPES.values()}:
        comments |= field_comments(module)
    transient = ", ".join(f"`{k}`" for k in sorted(events.TRANSIENT_KINDS))
    parts = [INTRO % {"version": events.EVENT_VERSION, "transient": transient}]
    for kind, cls in events.DATA_TYPES.items():
        parts.append(_kind_section(kind, cls, comments.get(cls.__name__, {})))
    return "\n".join(parts)


def _kind_section(kind: str, cls: type[msgspec.Struct], comments: dict[str, str]) -> str:
    flag = " (transient)" if kind in events.TRANSIENT_KINDS else ""
    return f"### `{kind}`{flag}\n\n{doc_of(cls)}\n\n" + field_table(cls, comments) + "\n"
