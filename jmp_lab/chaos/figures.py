"""The chaos runner's table of figures, shared by its campaigns (`jmp-chaos`, `jmp-chaos
rendered`): counts as they are, seconds rounded, violations by class, rates and wall time."""

from __future__ import annotations

from collections import Counter


def table(totals: Counter[str], wall: float) -> str:
    """The figures, one per line, aligned; violations by class after them; rates and wall
    time last."""
    order = ["iterations", "power iterations", "invocations", "kills", "cuts"]
    classes = sorted(k for k in totals if k.startswith("violations: "))
    rest = sorted(k for k in totals if k not in order and k not in classes)
    minutes = max(wall / 60, 1e-9)
    rates = {
        "kills per minute": f"{totals.get('kills', 0) / minutes:.1f}",
        "cuts per minute": f"{totals.get('cuts', 0) / minutes:.1f}",
        "wall time": f"{wall:.0f} s",
    }
    keys = [*order, *rest, *classes, *rates]
    width = max(len(k) for k in keys)
    lines = [f"{key:<{width}}  {_figure(totals.get(key, 0))}" for key in [*order, *rest, *classes]]
    lines += [f"{key:<{width}}  {value}" for key, value in rates.items()]
    return "\n".join(lines)


def _figure(value: float) -> str:
    """A count as it is, seconds (`time: ...`) rounded to the second."""
    return f"{value:.0f} s" if isinstance(value, float) else str(value)
