"""The resource limits of task scripts, as the environment sets them: pure data and parsing.

Read by the front ends (kernel/harness/opening.py for `run`, MCP and the Python API;
jev_harness/cli/check_launch.py for check-task), which refuse a bad value before anything
starts (exit 2, the variable named); the values then travel as plain integers (`as_dict`: in
`LoadTask.resources` to the harness worker, on stdin to the check-task probe), where
jev_harness/limits.py sets them as rlimits. A stdlib-only leaf (the jev_harness library reads
it too).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

CPU_GRACE_S = 5  # CPU seconds past the deadline, by default
# variable: (field, default, lowest, highest, what it bounds)
VARIABLES = {
    "JEV_HARNESS_MEMORY_MB": ("memory_mb", 1024, 64, 1 << 20, "the script's memory in MiB"),
    "JEV_HARNESS_FILE_MB": ("file_mb", 64, 1, 1 << 20, "the largest file it writes, in MiB"),
    "JEV_HARNESS_MAX_PROCESSES": (
        "max_processes",
        64,
        0,
        100_000,
        "the processes and threads it may add",
    ),
    "JEV_HARNESS_CPU_S": ("cpu_s", 0, 0, 1_000_000, "its CPU seconds (0: the deadline + 5)"),
}


class LimitsError(ValueError):
    """A JEV_HARNESS_* limit holds no valid value; the message names the variable."""


@dataclass(frozen=True)
class ScriptLimits:
    memory_mb: int = 1024
    file_mb: int = 64
    max_processes: int = 64
    cpu_s: int = 0  # 0: the deadline + CPU_GRACE_S

    def as_dict(self) -> dict[str, int]:
        return {field: getattr(self, field) for field, *_ in VARIABLES.values()}

    def cpu_budget(self, deadline_s: float) -> int:
        """The CPU seconds a script may use under a deadline of `deadline_s` seconds."""
        return self.cpu_s or int(deadline_s) + CPU_GRACE_S

    @classmethod
    def from_dict(cls, values: Mapping[str, object]) -> ScriptLimits:
        """From `as_dict`'s form; a missing or ill-typed value is the default."""
        fields = {field: default for field, default, *_ in VARIABLES.values()}
        for field in fields:
            value = values.get(field)
            if type(value) is int and value >= 0:
                fields[field] = value
        return cls(**fields)


def from_env(env: Mapping[str, str] | None = None) -> ScriptLimits:
    """The limits the environment sets, each variable checked strictly."""
    env = os.environ if env is None else env
    fields: dict[str, int] = {}
    for name, (field, default, low, high, what) in VARIABLES.items():
        raw = env.get(name)
        if raw is None:
            fields[field] = default
            continue
        if not re.fullmatch(r"[0-9]{1,9}", raw) or not low <= int(raw) <= high:
            raise LimitsError(
                f"{name}={raw!r} is not valid: {what} must be a whole number from {low} to {high}"
            )
        fields[field] = int(raw)
    return ScriptLimits(**fields)
