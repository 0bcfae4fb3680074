"""The observation's bounds: its canonical JSON form and how it is shrunk to 8,192 bytes.

Toolkit projections go first, then the oldest summaries (or records), then half the last_read
text, then half the goal; what is left is always at most the limit.
"""

from __future__ import annotations

import json
from typing import Any

from jev_harness.text import clip

MAX_OBSERVATION_BYTES = 8192


def canonical(obj: Any) -> bytes:
    """Compact, key-sorted UTF-8 JSON: the form that is measured and fingerprinted."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def fit_observation(obs: dict[str, Any], limit: int = MAX_OBSERVATION_BYTES) -> dict[str, Any]:
    """Shrink an observation until its canonical form fits `limit` bytes (oldest first)."""
    obs = dict(obs)
    while len(canonical(obs)) > limit:
        if obs.get("toolkits"):
            obs["toolkits"] = {}
        elif any(obs.get(k) for k in ("sources", "records")):
            key = max(("sources", "records"), key=lambda k: len(obs.get(k) or []))
            obs[key] = obs[key][1:]
        elif obs.get("last_read") and obs["last_read"].get("text"):
            text = obs["last_read"]["text"]
            obs["last_read"] = {**obs["last_read"], "text": text[: len(text) // 2]}
        elif len(obs.get("goal", "")) > 200:
            obs["goal"] = clip(obs["goal"], len(obs["goal"]) // 2)
        else:
            return {"goal": clip(obs.get("goal", ""), 200), "counts": obs.get("counts", {})}
    return obs
