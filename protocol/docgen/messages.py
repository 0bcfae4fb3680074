"""docs/MESSAGES.md, generated from protocol/messages.py, harness.py and pool.py (`make docs`).

Who answers what is not in the types, so it is written here once (ANSWERS, POOL_ANSWERS); the
generator refuses a request or reply of the protocol that these tables do not place, so a new
message cannot reach the docs without its place in a conversation.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from typing import Any

import msgspec

from protocol import harness as H
from protocol import messages as M
from protocol import pool as P
from protocol.docgen.fields import doc_of, field_comments, field_table

# request -> (the workers that serve it, the replies it gets besides `failed`, a note)
ANSWERS: dict[type[msgspec.Struct], tuple[str, tuple[type[msgspec.Struct], ...], str]] = {
    M.Heartbeat: ("every worker", (), "both ways, at least every `HEARTBEAT_MS`"),
    M.Route: ("router", (M.Routed,), ""),
    M.Generate: ("generator", (M.Progress, M.Generated), "`progress` while it streams"),
    M.ListTools: ("tool", (M.ToolList,), ""),
    M.Validate: ("tool", (M.Validated,), "no effect on anything"),
    M.RunTool: ("tool", (M.ToolProgress, M.ToolResult), "`tool_progress` while it runs"),
    M.Cancel: ("every worker", (), "the cancelled request ends: `failed` `cancelled`, or an "
               "interrupted `tool_result`"),
    M.Shutdown: ("every worker", (), "no answer: the worker exits with its tree"),
    H.LoadTask: ("harness", (H.TaskLoaded,), "`failed` `task` when the script will not build"),
    H.ProvideKeys: ("harness", (H.KeysTaken,), ""),
    H.TakeEntries: ("harness", (H.EntriesTaken,), ""),
    H.Observe: ("harness", (H.Observed,), ""),
    H.OfferDomain: ("harness", (H.DomainOffered,), ""),
    H.Operate: ("harness", (H.Operated,), "`failed` `unoffered` / `incomplete`"),
    H.WriteReport: ("harness", (H.Operated,), "after an `operated` that carried a `report`"),
    H.CloseTask: ("harness", (H.TaskClosed,), ""),
}  # fmt: skip
UNASKED = {M.Ready: "first message of every worker", M.Heartbeat: "every worker",
           M.Failed: "every worker"}  # fmt: skip

POOL_ANSWERS: dict[type[msgspec.Struct], tuple[tuple[type[msgspec.Struct], ...], str]] = {
    P.Spawn: ((P.Spawned, P.Exited, P.Refused), "`pool_spawned`, later `pool_exited`; or "
              "`pool_refused`"),
    P.Release: ((), "no answer: the pool reaps the worker and closes the connection"),
    P.Status: ((P.State,), "the `status` command"),
    P.Stop: ((), "no answer: the pool exits; its live workers keep serving"),
}  # fmt: skip

INTRO = """\
# Messages

<!-- Generated from protocol/messages.py, protocol/harness.py and protocol/pool.py by
     protocol/docgen/messages.py. Do not edit by hand: run `make docs`. A test fails when this
     file and the code disagree. -->

The kernel talks to each worker over one ZeroMQ `ipc://` socket (the kernel's ROUTER, the
worker's DEALER) in a private runtime directory. Every frame is msgpack
`{"v": %(wire)d, "body": <message>}`; the message is tagged by `kind`, the snake_case of its
class name. The codec (`protocol/codec.py`) peeks `v` first and raises `UnsupportedVersion`
instead of guessing; a frame that does not decode is answered by `failed` `bad_request` with
msgspec's path, never a crash on either side. Messages forbid unknown fields (both ends are one
build); a field added later gets a default, and a tag is never renamed.

Every request carries an `id` and every reply names it in `reply_to`; a `run_tool` or
`operate` id is the call_id of its `tool_started` record, fsynced before the message leaves.
Any request may be answered by `failed` instead of the replies named below.

## Kernel -> worker

| message | to | answered by | note |
|---|---|---|---|
"""


def generate() -> str:
    """The whole of docs/MESSAGES.md."""
    to_worker = [*typing.get_args(M.ToWorker), *typing.get_args(H.HarnessToWorker)]
    from_worker = [*typing.get_args(M.FromWorker), *typing.get_args(H.HarnessFromWorker)]
    _check_placed(to_worker, from_worker)
    comments = {**field_comments(M), **field_comments(H)}
    parts = [INTRO % {"wire": M.WIRE_VERSION}]
    for cls in to_worker:
        workers, replies, note = ANSWERS[cls]
        answered = ", ".join(_ref(r) for r in replies) or "—"
        parts.append(f"| {_ref(cls)} | {workers} | {answered} | {note} |\n")
    parts.append("\n## Worker -> kernel\n\n| message | from | answers | says |\n")
    parts.append("|---|---|---|---|\n")
    for cls in from_worker:
        asked = [r for r, (_, replies, _) in ANSWERS.items() if cls in replies]
        sender = UNASKED.get(cls) or ", ".join(dict.fromkeys(ANSWERS[r][0] for r in asked))
        answers = ", ".join(_ref(r) for r in asked) or "—"
        parts.append(f"| {_ref(cls)} | {sender} | {answers} | {_first_line(cls)} |\n")
    parts.append(_fail_codes())
    parts.append(_pool_section())
    parts.append("\n## Fields\n")
    for cls in [*to_worker, *(c for c in from_worker if c not in to_worker)]:
        parts.append(_section(cls, comments))
    parts.append("\n## Kernel <-> warm pool: fields\n")
    pool_comments = field_comments(P)
    for cls in typing.get_args(P.AnyPoolMsg):
        parts.append(_section(cls, pool_comments))
    parts.append("\n## Structs inside messages\n")
    for cls in _nested([*to_worker, *from_worker]):
        parts.append(_section(cls, comments, nested=True))
    return "".join(parts)


def _check_placed(to_worker: list[Any], from_worker: list[Any]) -> None:
    """Every request and reply of the protocol has its place in ANSWERS / POOL_ANSWERS."""
    replies = {r for _, rs, _ in ANSWERS.values() for r in rs} | set(UNASKED)
    pool = set(typing.get_args(P.AnyPoolMsg))
    pool_placed = set(POOL_ANSWERS) | {r for rs, _ in POOL_ANSWERS.values() for r in rs}
    unplaced = (
        [c for c in to_worker if c not in ANSWERS]
        + [c for c in from_worker if c not in replies]
        + [c for c in ANSWERS if c not in to_worker]
        + sorted(pool ^ pool_placed, key=str)
    )
    if unplaced:
        names = ", ".join(c.__name__ for c in unplaced)
        raise ValueError(f"protocol/docgen/messages.py: place {names} in ANSWERS/POOL_ANSWERS")


def _ref(cls: type[msgspec.Struct]) -> str:
    return f"[`{_tag(cls)}`](#{_tag(cls)})"


def _tag(cls: type[msgspec.Struct]) -> str:
    tag = cls.__struct_config__.tag
    return str(tag) if tag is not None else cls.__name__


def _first_line(cls: type) -> str:
    return doc_of(cls).split("\n\n", 1)[0].replace("\n", " ")


def _section(cls: type[msgspec.Struct], comments: dict[str, dict[str, str]],
             nested: bool = False) -> str:  # fmt: skip
    title = f"### {cls.__name__}" if nested else f"### `{_tag(cls)}`\n\n`{cls.__name__}`:"
    doc = doc_of(cls) or "(no docstring)"
    fields = field_table(cls, comments.get(cls.__name__, {}))
    return f"\n{title} {doc}\n\n{fields}\n" if not nested else f"\n{title}\n\n{doc}\n\n{fields}\n"


def _nested(messages: list[Any]) -> list[type[msgspec.Struct]]:
    """The plain structs that message fields hold (ModelUsage, ToolSpec, ...), in first use."""
    found: dict[type[msgspec.Struct], None] = {}

    def walk(tp: Any) -> None:
        for arg in typing.get_args(tp):
            walk(arg)
        plain = isinstance(tp, type) and issubclass(tp, msgspec.Struct) and tp not in found
        if plain and tp.__struct_config__.tag is None:
            found[tp] = None
            for field in msgspec.structs.fields(tp):
                walk(field.type)

    for cls in messages:
        for field in msgspec.structs.fields(cls):
            walk(field.type)
    return list(found)


def _fail_codes() -> str:
    """The `failed` codes, from the FailCode literal and its trailing comments."""
    source = inspect.getsource(M)
    lines = source.splitlines()
    rows = ["\n### `failed` codes\n\n| code | meaning |\n|---|---|"]
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FailCode":
            assert isinstance(node.value, ast.Subscript) and isinstance(node.value.slice, ast.Tuple)
            for element in node.value.slice.elts:
                assert isinstance(element, ast.Constant) and isinstance(element.value, str)
                line = lines[element.lineno - 1]
                note = line.split("  # ", 1)[1].strip() if "  # " in line else ""
                rows.append(f"| `{element.value}` | {note} |")
    return "\n".join(rows) + "\n"


def _pool_section() -> str:
    intro = (
        "A kernel asks its warm pool (`workers/pool/`) for a forked worker over a Unix socket,"
        f' `DIR/VIEW/pool.sock`. Frames are msgpack `{{"v": {P.POOL_VERSION}, "body": ...}}`,'
        " tagged `pool_*`; file descriptors ride with a `pool_spawn` (SCM_RIGHTS). Once a"
        " worker runs, it talks to its kernel over ZeroMQ exactly as above."
    )
    parts = [
        "\n## Kernel <-> warm pool\n\n",
        textwrap.fill(intro, 96, break_on_hyphens=False, break_long_words=False) + "\n\n",
        "| kernel asks | answered by | note |\n|---|---|---|\n",
    ]
    for cls, (replies, note) in POOL_ANSWERS.items():
        answered = ", ".join(_ref(r) for r in replies) or "—"
        parts.append(f"| {_ref(cls)} | {answered} | {note} |\n")
    return "".join(parts)
