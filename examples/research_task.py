"""Research a site: open links found on captured pages and save sourced quotes of the markers.

Inputs (JSON): `url` (the entry page), `allowed_origins` (list of scheme://host:port; default:
the entry's origin), `markers` (strings that recorded quotes must contain, one label each),
`output` (the report path, relative to the working directory). Optional: `provider` ("http",
the default, or "camofox") and `camofox_session` (the camofox userId).

The script names scope, completion check and limits only: no target answer, no sequence of
steps. Jev picks each tool and each parameter from the domains the toolkits offer.
"""

from __future__ import annotations

from typing import Any

import jev_harness as jev


def _markers(inputs: dict[str, Any]) -> list[str]:
    markers = inputs.get("markers")
    if isinstance(markers, str):
        markers = [markers]
    if (
        not isinstance(markers, list)
        or not markers
        or not all(isinstance(m, str) and m.strip() for m in markers)
    ):
        raise ValueError("inputs.markers must be a non-empty list of non-empty strings")
    return markers


def _provider(inputs: dict[str, Any]) -> Any:
    url = inputs.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ValueError("inputs.url must be the entry page's URL")
    origins = inputs.get("allowed_origins")
    kind = inputs.get("provider", "http")
    if kind == "http":
        return jev.HttpProvider(url, origins)
    if kind == "camofox":
        session = str(inputs.get("camofox_session") or "jev-harness")
        return jev.CamofoxProvider(url, origins, session)
    raise ValueError(f"inputs.provider must be 'http' or 'camofox', not {kind!r}")


def build(inputs: dict[str, Any]) -> jev.EvidenceTask:
    output = inputs.get("output")
    if not isinstance(output, str) or not output.strip():
        raise ValueError("inputs.output must be the report path")
    markers = _markers(inputs)
    store = jev.EvidenceStore()
    labels = {f"marker{i}": f"a passage that quotes {m!r}" for i, m in enumerate(markers, 1)}
    checks = {f"marker{i}": jev.contains(m) for i, m in enumerate(markers, 1)}
    return jev.EvidenceTask(
        store=store,
        toolkits=[jev.WebTools(_provider(inputs), store)],
        labels=labels,
        record_checks=checks,
        output=output,
        verifier=jev.markers_verifier(markers),
    )


workflow = jev.TaskScript(build)
