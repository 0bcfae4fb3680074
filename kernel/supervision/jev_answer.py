"""Jev's answer checked against the System One API's own rules before the kernel uses it.

The rules are the API's (jevcompat's conformance checks are the guide, with its tolerances):
the probability labels are exactly the offered ones, every probability is a finite number in
[0, 1], they sum to 1 within 0.05, the choice is an offered label and the most probable one
(within 0.005, for rounding), and the confidence is a finite number in [0, 1]. An answer that
breaks one is a router error, never a decision: no tool runs on it (issue 9, item 12).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

SUM_TOLERANCE = 0.05  # jevcompat EPS_SUM
ARGMAX_TOLERANCE = 0.005  # jevcompat EPS_ROUND: a rounded answer may tie within this
SHOWN = 3


def _labels(labels: Sequence[str]) -> str:
    shown = ", ".join(repr(x) for x in labels[:SHOWN])
    return shown + (f" (+{len(labels) - SHOWN} more)" if len(labels) > SHOWN else "")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def problem(
    offered: Sequence[str], choice: str, confidence: float, probabilities: Mapping[str, float]
) -> str:
    """'' for a valid answer, else the first rule it breaks, named with the values at fault."""
    extra = [label for label in probabilities if label not in offered]
    missing = [label for label in offered if label not in probabilities]
    if extra or missing:
        parts = [f"unoffered label {_labels(extra)}"] if extra else []
        parts += [f"no probability for offered {_labels(missing)}"] if missing else []
        return "Jev's probabilities do not match the offered labels: " + "; ".join(parts)
    for label, p in probabilities.items():
        if not _number(p) or not 0.0 <= p <= 1.0:
            return f"Jev gave {label!r} the probability {p!r}, not a number in [0, 1]"
    total = math.fsum(probabilities.values())
    if abs(total - 1.0) > SUM_TOLERANCE:
        return f"Jev's probabilities sum to {total:.4g}, not 1 (within {SUM_TOLERANCE})"
    if choice not in offered:
        return f"Jev chose {choice!r}, which was not offered"
    best = max(offered, key=lambda label: probabilities[label])
    if probabilities[best] - probabilities[choice] > ARGMAX_TOLERANCE:
        return (
            f"Jev chose {choice!r} (p={probabilities[choice]:.4g}) but {best!r} is more "
            f"probable (p={probabilities[best]:.4g}): the choice must be the most probable option"
        )
    if not _number(confidence) or not 0.0 <= confidence <= 1.0:
        return f"Jev's confidence is {confidence!r}, not a number in [0, 1]"
    return ""
