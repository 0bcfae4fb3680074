"""Research a site: open links found on captured pages and save sourced quotes of the markers.

Inputs (JSON): `url` (the entry page), `allowed_origins` (list of scheme://host:port; default:
the entry's origin), `markers` (each requested category, the record label, mapped to the marker
its quotes must contain: `{"requirements": "<source marker>"}`; a list of markers is accepted
too, each its own label), `output` (the report path, relative to the working directory).
Optional: `provider` ("http", the default; "chromium", pages rendered by a local headless
Chromium, JavaScript and all; or "camofox", a camofox-browser server) and `camofox_session` (the
camofox userId).

The script names scope, completion check and limits only: no target answer, no sequence of
steps. Jev picks each tool and each parameter from the domains the toolkits offer.
"""

from __future__ import annotations

from typing import Any

import jev_harness as jev


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
    if kind == "chromium":
        return jev.ChromiumProvider(url, origins)
    raise ValueError(f"inputs.provider must be 'http', 'chromium' or 'camofox', not {kind!r}")


def build(inputs: dict[str, Any]) -> jev.EvidenceTask:
    output = inputs.get("output")
    if not isinstance(output, str) or not output.strip():
        raise ValueError("inputs.output must be the report path")
    markers = jev.markers_by_label(inputs.get("markers"), "inputs.markers")
    store = jev.EvidenceStore()
    return jev.EvidenceTask(
        store=store,
        toolkits=[jev.WebTools(_provider(inputs), store)],
        labels={label: f"a passage that quotes {m!r}" for label, m in markers.items()},
        record_checks={label: jev.contains(m) for label, m in markers.items()},
        output=output,
        verifier=jev.markers_verifier(markers),
    )


workflow = jev.TaskScript(build)
