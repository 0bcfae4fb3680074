"""Find passages that contain given markers in a local workspace; save them as a JSON report.

Inputs: `root` (the workspace directory), `queries` (searches Jev may run), `markers` (each
must be quoted from a file), `output` (the report path, relative to the working directory).
The script names scope, completion check and limits only: which directory to list, which query
to run, which file to read and which passage to quote are Jev's choices among what the run has
seen. Run it with:

    jev-harness run examples/workspace_task.py --goal "Find the release codename" \
    --inputs '{"root": "proj", "queries": ["codename"], "markers": ["ORCA"], "output": "r.json"}'
"""

from __future__ import annotations

import os
from typing import Any

import jev_harness as jev


def _text(inputs: dict[str, Any], key: str) -> str:
    value = inputs.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"input {key!r} must be a non-empty string")
    return value


def _strings(inputs: dict[str, Any], key: str, *, required: bool) -> list[str]:
    value = inputs.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"input {key!r} must be a list of non-empty strings")
    if required and not value:
        raise ValueError(f"input {key!r} must name at least one")
    return value


def build(inputs: dict[str, Any]) -> jev.EvidenceTask:
    root = _text(inputs, "root")
    if not os.path.isdir(root):
        raise ValueError(f"input 'root' is not a directory: {root!r}")
    markers = _strings(inputs, "markers", required=True)
    store = jev.EvidenceStore()
    return jev.EvidenceTask(
        store=store,
        toolkits=[
            jev.WorkspaceToolkit(root, _strings(inputs, "queries", required=False), store=store)
        ],
        labels={marker: f"a passage quoting {marker}" for marker in markers},
        record_checks={marker: jev.contains(marker) for marker in markers},
        output=_text(inputs, "output"),
        verifier=jev.markers_verifier(markers),
    )


workflow = jev.TaskScript(build)
