"""A program embedding jmp through its Python API: the matrix's `api` and `harness_api` front ends.

    python embed.py agent   SPEC_JSON   # main.Session / Models / Tools / Agent (CONTRACT section 4)
    python embed.py harness SPEC_JSON   # jev_harness.open_session(...).delegate()

SPEC (JSON): `home` (sessions dir), and for `agent` `workspace` and `prompt`; for `harness`
`script`, `goal`, `inputs` and optionally `context`. Every event the API hands its subscriber
is printed as one JSON line, then `{"kind": "result", "seq": null, "data": RESULT}`: stdout is
exactly what the embedding program got from jmp, so the matrix checks it like the CLI's stdout.
The kernel runs in this process (its pid is this one's), in the working directory it was
started in.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

_out = threading.Lock()


def emit(line: bytes) -> None:
    with _out:
        sys.stdout.buffer.write(line + b"\n")
        sys.stdout.buffer.flush()


def on_event(event: Any) -> None:
    from protocol.codec import encode_event

    emit(encode_event(event))


def agent(spec: dict[str, Any]) -> dict[str, Any]:
    import main

    home, workspace = Path(spec["home"]), Path(spec["workspace"])
    session = main.Session.create(home, workspace, on_event=on_event)
    models = main.Models(session, main.Settings.environment())
    tools = main.Tools(workspace, session.directory / "terminal", main.load_servers())
    run = main.Agent(
        session,
        models,
        tools,
        policy=main.ContextPolicy(),
        instructions=main.instructions(),
        cancel=threading.Event(),
    )
    try:
        return dict(run.run(prompt=spec["prompt"]))
    finally:
        run.close()


def harness(spec: dict[str, Any]) -> dict[str, Any]:
    import jev_harness

    with jev_harness.open_session(
        spec["script"],
        spec["goal"],
        spec["inputs"],
        context=spec.get("context"),
        sessions_dir=spec["home"],
        on_event=on_event,
    ) as session:
        return dict(session.delegate())


if __name__ == "__main__":
    which, spec = sys.argv[1], json.loads(sys.argv[2])
    result = {"agent": agent, "harness": harness}[which](spec)
    emit(json.dumps({"kind": "result", "seq": None, "data": result}).encode())
