"""The worker's kernel-silence window: a worker that hears nothing from its kernel this long
kills its tree and exits (workers/base.py). Read once, at worker start."""

from __future__ import annotations

from collections.abc import Mapping

KERNEL_SILENCE_S = 6.0  # no kernel message for this long: the kernel is gone or wedged (a loaded
# 2-core machine starved the kernel's I/O thread past 3 s; PDEATHSIG, the ppid check and the
# pidfd catch a dead kernel at once, so this only bounds a wedged one)
SILENCE_ENV = "JMP_KERNEL_SILENCE_S"  # a shorter window (README "Configuration"): tests of it

__all__ = ["KERNEL_SILENCE_S", "SILENCE_ENV", "kernel_silence_s"]


def kernel_silence_s(env: Mapping[str, str]) -> float:
    """JMP_KERNEL_SILENCE_S (seconds, finite, > 0), else KERNEL_SILENCE_S, the contract's
    window; a value that is not such a number is ignored."""
    try:
        value = float(env.get(SILENCE_ENV) or KERNEL_SILENCE_S)
    except ValueError:
        return KERNEL_SILENCE_S
    return value if 0 < value < float("inf") else KERNEL_SILENCE_S
