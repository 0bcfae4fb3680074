"""Redaction cost: `python -m bench.redact` prints the table `run()` returns.

Every byte leaving jmp goes through the redactor, so its cost per event matters. Measured: a
~100 KB tool output with 50 known secrets (none present, the common case), as a ratio to the
naive baseline (one `str.replace` per secret over the same text; the redactor also matches
token formats, which the baseline does not, so the ratio is a reference, not a goal). Goal: under
0.25 s per 100 KB (formerly a wall-clock assert in tests/test_redact.py; timing lives here now).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from kernel.store.redact import Redactor

SECRETS = [f"secret-number-{i:04d}" for i in range(50)]
TEXT = "ordinary tool output line with nothing secret in it\n" * 2000  # ~100 KB
RUNS = 15


def _median_s(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _naive(text: str) -> str:
    for secret in SECRETS:
        text = text.replace(secret, "[redacted]")
    return text


def run() -> str:
    """Time both over the same text; the redactor must leave it unchanged."""
    redactor = Redactor(SECRETS)
    assert redactor.text(TEXT) == TEXT
    ours = _median_s(lambda: redactor.text(TEXT))
    naive = _median_s(lambda: _naive(TEXT))
    return "\n".join(
        [
            f"redact {len(TEXT.encode()):,} bytes, {len(SECRETS)} known secrets, none present",
            f"{'redactor ms':>12} {'naive ms':>9} {'ratio':>6}",
            f"{ours * 1000:>12.2f} {naive * 1000:>9.2f} {ours / naive:>5.2f}x",
            "goal: redactor < 250 ms per 100 KB (the ratio is for reference)",
        ]
    )


if __name__ == "__main__":
    print(run())
