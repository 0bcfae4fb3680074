"""The explorer's workloads: short sessions of tool calls on the CLI, by name and in sets.

A workload is a chaos plan (jmp_lab/chaos/plan.py) with no kill and no fault but the one it
names: its requests (the task, a follow-up), each a few calls from {bash, write, edit, MCP},
and optionally a `--compact` before the follow-up or a kill of the kernel during its first
call, after which the user acknowledges the interrupted call (`--ack-interrupted`). Named by
its calls: `bash+write` (one request of two calls), `bash|edit` (a follow-up of one call),
`write|compact|edit`, `bash!ack` (the kernel killed while the command runs; acknowledged).
The workspace holds `notes_s1.txt` .. `notes_s3.txt` (with their anchors) from the start, so
up to three edits are possible without a write first.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

from jmp_lab.chaos.plan import IterationPlan, Kill, Step, step

KINDS = ("bash", "write", "edit", "mcp")
# notes files in the workspace from the start: three edits are possible without a write
SEED_FILES = {f"notes_s{n}.txt": f"seed\nANCHOR_s{n}\n" for n in (3, 2, 1)}
SECONDS = 0.05  # how long each command (and MCP call) takes


@dataclass(frozen=True)
class Workload:
    name: str
    plan: IterationPlan
    compact: bool = False  # a `--compact` between the requests


def workload(name: str, warm: bool = True) -> Workload:
    """The workload `name` (see the module docstring); `warm`: workers from the warm pool."""
    code = zlib.crc32(f"{name}/{warm}".encode()) % 10**6
    written = list(SEED_FILES)  # an edit takes the last written, else the next seed file
    requests: list[list[Step]] = []
    compact = ack = False
    k = 1
    for part in name.split("|"):
        if part == "compact":
            compact = True
            continue
        calls, _, mark = part.partition("!")
        ack = ack or mark == "ack"
        steps = []
        for kind in calls.split("+"):
            if kind not in KINDS:
                raise ValueError(f"unknown call {kind!r} in workload {name!r}: one of {KINDS}")
            steps.append(
                step(
                    kind,
                    f"x{code}r{len(requests)}s{k}",
                    k,
                    SECONDS,
                    written,
                    lambda files: files[-1],
                )
            )
            k += 1
        requests.append(steps)
    kills = [Kill("kernel", "tool", 1, delay=0.0)] if ack else []
    plan = IterationPlan(
        seed=0,
        index=code,
        requests=requests,
        kills=list(kills),
        faults=[],
        ack_direct=False,
        keys={"jev": f"jev-{code}-key", "flash": f"flash-{code}-key", "mcp": f"mcp-{code}-key"},
        warm=warm,
    )
    return Workload(name + ("" if warm else "@cold"), plan, compact)


def calls_up_to(n: int) -> list[str]:
    """Every sequence of 1..n calls from KINDS, in one request."""
    return [
        "+".join(combo)
        for size in range(1, n + 1)
        for combo in itertools.product(KINDS, repeat=size)
    ]


SETS: dict[str, list[str]] = {
    "smoke": ["bash"],
    "cli-1": calls_up_to(1),
    "cli-2": calls_up_to(2),
    "cli-3": calls_up_to(3),
    "session": ["bash|bash", "write|compact|edit", "bash!ack|write"],
    "cold": ["bash@cold", "mcp@cold"],
}
SETS["cli"] = SETS["cli-1"] + SETS["session"] + ["bash@cold"]
SETS["all"] = SETS["cli-3"] + SETS["session"] + SETS["cold"]


def named(names: list[str]) -> list[Workload]:
    """Workloads by name or set name (`cli-3`), in order, each once; `NAME@cold`: cold."""
    found: list[str] = []
    for name in names:
        for item in SETS.get(name, [name]):
            if item not in found:
                found.append(item)
    return [workload(item.removesuffix("@cold"), warm=not item.endswith("@cold")) for item in found]
