"""What one iteration will do, derived from (seed, iteration) alone: same seed, same plan.

A plan is the task (two requests, each a few tool calls with unique witness tokens), the kills
to deliver in order (target, phase, which occurrence), and the faults beyond SIGKILL. Timing
jitter decides only *when exactly* a kill lands, never *what* is planned.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.targets import TARGETS

PHASES = ("route", "generate", "tool", "between")
# Faults an invocation may start with (besides kills): a file-size limit on the kernel, a Jev
# answer that stalls or fails once, a Flash stream that stalls or is cut.
FAULTS = ("fsize", "jev_delay", "jev_http500", "flash_slow", "flash_cut")


@dataclass(frozen=True)
class Step:
    """One planned tool call: `token` appears in its arguments and in its effect."""

    token: str
    tool: str  # bash, write, edit, mcp.witness
    arguments: dict[str, Any]  # paths relative to the workspace (resolved by the world)


@dataclass(frozen=True)
class Kill:
    """SIGKILL to `target` at the `nth` occurrence of `phase` in an invocation."""

    target: str
    phase: str
    nth: int
    chunk: int = 0  # generate: the streamed chunk at which it lands
    delay: float = 0.0  # tool: seconds after the witness appears
    tear: float | None = None  # kernel kills: cut the last line at this fraction of it


@dataclass(frozen=True)
class Fault:
    kind: str
    value: float


@dataclass(frozen=True)
class IterationPlan:
    seed: int
    index: int
    requests: list[list[Step]]
    kills: list[Kill]
    faults: list[Fault | None]  # by invocation number; None = a clean invocation
    ack_direct: bool  # after a kill the user acks at once instead of reopening first
    keys: dict[str, str] = field(default_factory=dict)
    warm: bool = True  # workers from the warm pool (else every worker is a cold spawn)

    def steps(self) -> list[Step]:
        return [step for request in self.requests for step in request]


def _steps(rng: random.Random, prefix: str, first: int, count: int, written: list[str]) -> list:
    steps: list[Step] = []
    for k in range(first, first + count):
        token = f"{prefix}s{k}"
        kinds = ["bash", "bash", "mcp", "write"] + (["edit", "edit"] if written else [])
        kind = rng.choice(kinds)
        seconds = round(rng.uniform(0.2, 1.2), 2)
        if kind == "bash":
            line = f'echo "{token} $(date +%s.%N)" >> witness.log; sleep {seconds}'
            steps.append(Step(token, "bash", {"command": line}))
        elif kind == "mcp":
            steps.append(Step(token, "mcp.witness", {"id": token, "seconds": seconds}))
        elif kind == "write":
            path = f"notes_{k}.txt"
            written.append(path)
            text = f"{token}\nANCHOR_{k}\n"
            steps.append(Step(token, "write", {"path": path, "file_text": text}))
        else:
            path = rng.choice(written)
            anchor = "ANCHOR_" + path.removeprefix("notes_").removesuffix(".txt")
            arguments = {
                "command": "str_replace",
                "path": path,
                "old_str": anchor,
                "new_str": f"EDITED {token}",
            }
            steps.append(Step(token, "edit", arguments))
            written.remove(path)  # one edit per anchor
    return steps


def _kill(rng: random.Random, targets: tuple[str, ...]) -> Kill:
    target = rng.choice(targets)
    phase = rng.choice(PHASES)
    tear = round(rng.random(), 3) if target == "kernel" and rng.random() < 0.4 else None
    return Kill(
        target=target,
        phase=phase,
        nth=rng.randint(1, 3) if phase != "between" else rng.randint(2, 14),
        chunk=rng.randint(0, 6),
        delay=round(rng.uniform(0.0, 0.15), 3),
        tear=tear,
    )


def _fault(rng: random.Random, kinds: tuple[str, ...] = FAULTS) -> Fault | None:
    if rng.random() < 0.6:
        return None
    kind = rng.choice(kinds)
    value = {
        "fsize": rng.randint(50, 6000),  # bytes the log may still grow by
        "jev_delay": round(rng.uniform(0.2, 2.0), 2),
        "jev_http500": 1,
        "flash_slow": round(rng.uniform(0.005, 0.05), 3),
        "flash_cut": rng.randint(1, 4),
    }[kind]
    return Fault(kind, float(value))


def make_plan(
    seed: int, index: int, targets: tuple[str, ...] = TARGETS, short: bool = False
) -> IterationPlan:
    """The plan of iteration `index` of the campaign `seed` (a pure function of the arguments).

    `short` (the campaign in `make test`): one request of two calls and at most two kills."""
    rng = random.Random(f"jmp-chaos:{seed}:{index}:{short}")
    prefix = f"W{seed}i{index}{rng.getrandbits(24):06x}"
    written: list[str] = []
    first = _steps(rng, prefix, 0, 2 if short else rng.randint(2, 5), written)
    second = _steps(rng, prefix, len(first), rng.randint(2, 4), written)
    kills = [_kill(rng, targets) for _ in range(rng.randint(1, 2) if short else rng.randint(2, 6))]
    # short: only faults that cost no extra run (each failed run is another cold tool worker)
    kinds = ("jev_delay", "flash_slow") if short else FAULTS
    faults = [_fault(rng, kinds) for _ in range(8)]
    keys = {
        "jev": f"jev-chaos-{rng.getrandbits(96):024x}",
        "flash": f"sk-chaos-{rng.getrandbits(96):024x}",
        "mcp": f"mcp-chaos-{rng.getrandbits(96):024x}",
    }
    requests = [first] if short else [first, second]
    ack_direct, warm = rng.random() < 0.5, rng.random() < 0.8
    return IterationPlan(seed, index, requests, kills, faults, ack_direct, keys, warm)
