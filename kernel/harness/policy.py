"""The selection policy (docs/HARNESS.md section 3): accept Jev's choice from probabilities alone.

`match` needs top >= 0.55 and margin (top minus second) >= 0.10; `explore` needs top >= 0.30
and margin >= 0.0. Jev's `confidence` is never consulted. An answer whose labels differ from the
offered ones, or whose choice is not the argmax of its own probabilities, is refused as
inconsistent rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

THRESHOLDS: dict[str, tuple[float, float]] = {"match": (0.55, 0.10), "explore": (0.30, 0.0)}
EPSILON = 1e-9  # float noise: 0.65 - 0.55 is 0.09999999999999998, and that must pass 0.10
TOP_RECORDED = 8  # probabilities kept in a record: the highest eight


@dataclass(frozen=True)
class Decision:
    """The policy's verdict on one question. `reason` says why a choice was refused."""

    choice: str
    accepted: bool
    selection: str
    method: str = "jev"  # "jev", "single_option" or "caller"
    top: float | None = None
    margin: float | None = None
    probabilities: dict[str, float] = field(default_factory=dict)  # the top eight, descending
    reason: str = ""  # "" | "below_threshold" | "inconsistent"

    def describe(self) -> str:
        """The top options with their probabilities, for a needs_input summary."""
        return ", ".join(f"{label} {p:.2f}" for label, p in list(self.probabilities.items())[:3])


def top_probabilities(
    probabilities: Mapping[str, float], n: int = TOP_RECORDED
) -> dict[str, float]:
    """The n highest, descending; ties keep the offered order."""
    ranked = sorted(probabilities.items(), key=lambda kv: -kv[1])
    return {label: round(p, 6) for label, p in ranked[:n]}


def decide(
    selection: str, offered: Sequence[str], choice: str, probabilities: Mapping[str, float]
) -> Decision:
    """Apply `selection` to Jev's answer over `offered` labels."""
    if selection not in THRESHOLDS:
        raise ValueError(f"unknown selection {selection!r} (match or explore)")
    ranked = top_probabilities(probabilities, len(probabilities))
    values = list(ranked.values())
    top = values[0] if values else 0.0
    margin = top - values[1] if len(values) > 1 else top
    verdict = Decision(
        choice=choice,
        accepted=False,
        selection=selection,
        top=top,
        margin=round(margin, 6),
        probabilities=dict(list(ranked.items())[:TOP_RECORDED]),
    )
    if set(probabilities) != set(offered) or choice not in probabilities:
        return _with(verdict, reason="inconsistent")
    if probabilities[choice] + EPSILON < max(probabilities.values()):
        return _with(verdict, reason="inconsistent")  # the choice is not its own argmax
    least_top, least_margin = THRESHOLDS[selection]
    if top + EPSILON < least_top or margin + EPSILON < least_margin:
        return _with(verdict, reason="below_threshold")
    return _with(verdict, accepted=True)


def single_option(label: str, selection: str) -> Decision:
    """A domain (or offer) with exactly one option: chosen in code, no question asked."""
    return Decision(
        choice=label,
        accepted=True,
        selection=selection,
        method="single_option",
        top=1.0,
        margin=1.0,
        probabilities={label: 1.0},
    )


def by_caller(label: str, selection: str) -> Decision:
    """A choice made by a direct caller (Python or an MCP client): no probabilities."""
    return Decision(choice=label, accepted=True, selection=selection, method="caller")


def _with(decision: Decision, **changes: object) -> Decision:
    from dataclasses import replace

    return replace(decision, **changes)  # type: ignore[arg-type]
