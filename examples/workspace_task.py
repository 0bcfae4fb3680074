"""Find passages that contain given markers in a local workspace; save them as a JSON report.

Inputs: `root` (the workspace directory), `queries` (searches Jev may run), `markers` (each
requested category, the record label, mapped to the marker its quote must contain, e.g.
`{"implementation": "ORCA"}`; a list of markers is accepted too, each its own label), `output`
(the report path, relative to the working directory). The script names scope, completion check
and limits only: which directory to list, which query to run, which file to read and which
passage to quote are Jev's choices among what the run has seen. Run it with:

    jev-harness run examples/workspace_task.py --goal "Find the release codename" \
    --inputs '{"root": "proj", "queries": ["codename"], "markers": {"codename": "ORCA"},
               "output": "r.json"}'

where `proj` is a directory of yours (docs/JEV-HARNESS.md, "Commands", makes one to try it on).
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


def _strings(inputs: dict[str, Any], key: str) -> list[str]:
    value = inputs.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"input {key!r} must be a list of non-empty strings")
    return value


def build(inputs: dict[str, Any]) -> jev.EvidenceTask:
    root = _text(inputs, "root")
    if not os.path.isdir(root):
        raise ValueError(f"input 'root' is not a directory: {root!r}")
    markers = jev.markers_by_label(inputs.get("markers"), "inputs.markers")
    store = jev.EvidenceStore()
    return jev.EvidenceTask(
        store=store,
        toolkits=[jev.WorkspaceToolkit(root, _strings(inputs, "queries"), store=store)],
        labels={label: f"a passage quoting {m}" for label, m in markers.items()},
        record_checks={label: jev.contains(m) for label, m in markers.items()},
        output=_text(inputs, "output"),
        verifier=jev.markers_verifier(markers),
    )


workflow = jev.TaskScript(build)
