"""What one iteration will do, derived from (seed, iteration) alone: same seed, same plan.

A plan is the task (two requests, each a few tool calls with unique witness tokens), the kills
to deliver in order (target, phase, which occurrence), and the faults beyond SIGKILL. Timing
jitter decides only *when exactly* a kill lands, never *what* is planned. A power iteration
(`power`: the filesystem model of its lossy disk) also plans power cuts (`Cut`) among its
kills, and may start an invocation with EIO on an fsync or ENOSPC on a write.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from jmp_lab.chaos.powercut.cut import DATA_VARIANTS, DIR_VARIANTS
from jmp_lab.chaos.powercut.model import MODELS
from jmp_lab.chaos.targets import TARGETS

PHASES = ("route", "generate", "tool", "between")
# Faults an invocation may start with (besides kills): a file-size limit on the kernel, a Jev
# answer that stalls or fails once, a Flash stream that stalls or is cut.
FAULTS = ("fsize", "jev_delay", "jev_http500", "flash_slow", "flash_cut")
# A power iteration's faults of the disk: EIO on the n-th fsync, ENOSPC on the n-th write (of
# anything on it but the caches jmp may ignore failing: the recall cache and events.index are
# checked against the log and rebuilt from it; see power.py `cache_only` for directory syncs)
DISK_FAULTS = ("eio_fsync", "enospc")
CACHES = ("memory.sqlite3", "events.index")
KEPT_FILES = r"^(?!.*(memory\.sqlite3|events\.index))"
# Where a cut lands: the kill phases, right after the n-th printed record of a kind (`event`),
# at the n-th operation of the disk on a matching path (`fs`), or at a random moment.
CUT_PHASES = ("route", "generate", "tool", "between", "event", "fs", "random")
EVENT_KINDS = ("session", "user", "run_started", "route", "tool_started", "tool_finished", "final")
RECURRING_KINDS = ("run_started", "route", "tool_started", "tool_finished")  # every run or step
LOG = r"/events\.jsonl$"
# fs triggers: (op, path pattern, bytes the write holds, freeze before/after)
FS_POINTS = (
    ("write", LOG, '"kind":"tool_finished"', "after"),  # the record written, not yet synced
    ("write", LOG, '"kind":"final"', "after"),
    ("write", LOG, '"kind":"tool_started"', "after"),  # between the write and its fsync
    ("fsync", LOG, "", "after"),
    ("fsync", LOG, "", "before"),
    ("rename", r"/artifacts/", "", "after"),  # an artifact in place, its directory unsynced
    ("rename", r"^/[0-9a-f]{32}$", "", "after"),  # a new session's directory renamed in
    ("fsync", r"/artifacts/", "", "after"),
    ("rename", r"/context-", "", "after"),
    ("write", r"memory\.sqlite3", "", "after"),
)

# A quick session never compacts, so it never writes a context checkpoint: a cut planned there
# held up every kill and cut behind it (an iteration of 0 kills and 0 cuts).
QUICK_FS_POINTS = tuple(point for point in FS_POINTS if "context" not in point[1])


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
class Cut:
    """A power cut at the `nth` occurrence of `phase` (see CUT_PHASES), then the disk keeps
    what its model and the variants (`data`, `dirs`, drawn with `seed`) say."""

    phase: str
    nth: int
    kind: str = ""  # event: the record's kind; fs: the operation
    pattern: str = ""  # fs: a regex on the path inside the disk
    contains: str = ""  # fs write: only writes holding these bytes count
    timing: str = "after"  # fs: freeze before or after the operation
    delay: float = 0.0  # random: seconds into the invocation; tool: after the witness
    chunk: int = 0  # generate: the streamed chunk at which it lands
    data: str = "lose"
    dirs: str = "lose"
    seed: int = 0
    target: str = "power"  # a cut takes every process of the run

    @property
    def tear(self) -> None:
        return None


@dataclass(frozen=True)
class Fault:
    kind: str
    value: float


@dataclass(frozen=True)
class IterationPlan:
    seed: int
    index: int
    requests: list[list[Step]]
    kills: list[Kill | Cut]
    faults: list[Fault | None]  # by invocation number; None = a clean invocation
    ack_direct: bool  # after a kill the user acks at once instead of reopening first
    keys: dict[str, str] = field(default_factory=dict)
    warm: bool = True  # workers from the warm pool (else every worker is a cold spawn)
    power: str | None = None  # a power iteration: the model of its lossy disk

    def steps(self) -> list[Step]:
        return [step for request in self.requests for step in request]


def _steps(
    rng: random.Random,
    prefix: str,
    first: int,
    count: int,
    written: list[str],
    pace: tuple[float, float] = (0.2, 1.2),
    mcp: bool = True,
) -> list:
    steps: list[Step] = []
    for k in range(first, first + count):
        token = f"{prefix}s{k}"
        kinds = ["bash", "bash", "mcp" if mcp else "bash", "write"]
        kinds += ["edit", "edit"] if written else []
        kind = rng.choice(kinds)
        seconds = round(rng.uniform(*pace), 2)
        steps.append(step(kind, token, k, seconds, written, rng.choice))
    return steps


def step(
    kind: str,
    token: str,
    k: int,
    seconds: float,
    written: list[str],
    pick: Any = lambda files: files[0],
) -> Step:
    """One planned call of `kind` (bash, mcp, write, edit) with witness `token`: `written`
    holds the notes files whose anchor no edit has replaced yet (a write adds its file, an edit
    takes the one `pick` chooses)."""
    if kind == "bash":
        line = f'echo "{token} $(date +%s.%N)" >> witness.log; sleep {seconds}'
        return Step(token, "bash", {"command": line})
    if kind == "mcp":
        return Step(token, "mcp.witness", {"id": token, "seconds": seconds})
    if kind == "write":
        path = f"notes_{k}.txt"
        written.append(path)
        return Step(token, "write", {"path": path, "file_text": f"{token}\nANCHOR_{k}\n"})
    path = pick(written)
    anchor = "ANCHOR_" + path.removeprefix("notes_").removesuffix(".txt")
    arguments = {
        "command": "str_replace",
        "path": path,
        "old_str": anchor,
        "new_str": f"EDITED {token}",
    }
    written.remove(path)  # one edit per anchor
    return Step(token, "edit", arguments)


def _kill(rng: random.Random, targets: tuple[str, ...], quick: bool = False) -> Kill:
    target = rng.choice(targets)
    phase = rng.choice(PHASES)
    tear = round(rng.random(), 3) if target == "kernel" and rng.random() < 0.4 else None
    # quick: the next moment of its phase (route, generate and tool recur every step, so a kill
    # fires soon and never holds up the ones queued behind it), between at the 1st-3rd record
    soon = (1, 1, 1, 3) if quick else (1, 3, 2, 14)
    return Kill(
        target=target,
        phase=phase,
        nth=rng.randint(*soon[:2]) if phase != "between" else rng.randint(*soon[2:]),
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
    seed: int,
    index: int,
    targets: tuple[str, ...] = TARGETS,
    short: bool = False,
    power: bool = False,
) -> IterationPlan:
    """The plan of iteration `index` of the campaign `seed` (a pure function of the arguments).

    `short` (the campaign in `make test`): one request of two calls and at most two kills.
    `power`: a power iteration (same task; cuts among its kills, the model by `index`)."""
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
    plan = IterationPlan(seed, index, requests, kills, faults, ack_direct, keys, warm)
    return _power(plan, short) if power else plan


# --quick: the kill targets weighted by what a kill costs the campaign. A killed router or
# generator is replaced inside the run and its request sent again (several such kills land in
# one run); a killed kernel, tool worker or MCP call ends the run (another run, its workers);
# a killed pool makes its lane's spawns cold until the runner has it back (drive.py). The
# step's sleep range; cold in 1 of COLD_ONE_IN iterations (a cold tool worker imports
# OpenHands, ~9 s idle, at every run), counted apart in the table.
QUICK_TARGETS = (("kernel",) * 4 + ("router",) * 10 + ("generator",) * 10 + ("tool",) * 4
                 + ("mcp",) * 3 + ("pool",))  # fmt: skip
QUICK_PACE = (0.05, 0.3)
QUICK_STEPS = (3, 4)  # a route and a generation a step: moments for the in-run kills
QUICK_KILLS = (5, 9)
QUICK_CUTS = (3, 5)
COLD_ONE_IN = 10
# An MCP iteration in 2 of 5: the witness MCP server's start (the `mcp` SDK's import, 1.5 s of
# CPU) is on the path of every run of a world that has one (world.py); the others have none,
# their MCP calls become shell commands and their MCP kills generator kills.
MCP_ONE_IN = 0.4
COLD_ITEMS = 3  # a cold iteration's kills or cuts: each run after one starts cold again


def make_quick_plan(seed: int, index: int, power: bool = False) -> IterationPlan:
    """An iteration aimed at kill points (`--quick`, what `make chaos` runs): a short request
    (3-4 calls, a follow-up of 1-2 in a third of the iterations), calls that run 0.05-0.3 s,
    5-9 kills, each at the next moment of its phase (route, generate, tool; between at the
    1st-3rd record): kills are delivered in order, so one planned for a moment the session
    never reaches would hold up every kill behind it. A power iteration: 3-5
    cuts (at recurring records, the 1st matching disk operation, kill phases, or a random
    moment) and at most two kills. Cold in 1 of COLD_ONE_IN, with at most COLD_ITEMS kills
    or cuts; an MCP server in 2 of 5 (MCP_ONE_IN). A pure function of the arguments, like
    `make_plan`."""
    rng = random.Random(f"jmp-chaos-quick:{seed}:{index}")
    prefix = f"W{seed}q{index}{rng.getrandbits(24):06x}"
    written: list[str] = []
    mcp = rng.random() < MCP_ONE_IN
    first = _steps(rng, prefix, 0, rng.randint(*QUICK_STEPS), written, QUICK_PACE, mcp)
    follow = rng.random() < 1 / 3
    second = _steps(rng, prefix, len(first), rng.randint(1, 2), written, QUICK_PACE, mcp)
    kills = [_kill(rng, QUICK_TARGETS, quick=True) for _ in range(rng.randint(*QUICK_KILLS))]
    if not mcp:  # no MCP server in this world: its kills go to the generator
        kills = [
            dataclasses.replace(k, target="generator") if k.target == "mcp" else k for k in kills
        ]
    faults = [_fault(rng) if rng.random() < 0.5 else None for _ in range(8)]
    keys = {
        "jev": f"jev-chaos-{rng.getrandbits(96):024x}",
        "flash": f"sk-chaos-{rng.getrandbits(96):024x}",
        "mcp": f"mcp-chaos-{rng.getrandbits(96):024x}",
    }
    requests = [first, second] if follow else [first]
    ack_direct, warm = rng.random() < 0.5, rng.random() >= 1 / COLD_ONE_IN
    kills = _reachable(kills if warm else kills[:COLD_ITEMS], requests[0])
    plan = IterationPlan(seed, index, requests, kills, faults, ack_direct, keys, warm)
    if not power:
        return plan
    rng = random.Random(f"jmp-chaos-quick-power:{seed}:{index}")
    items: list[Kill | Cut] = [_cut(rng, quick=True) for _ in range(rng.randint(*QUICK_CUTS))]
    items += plan.kills[: rng.randint(0, 2)]
    rng.shuffle(items)
    items = _reachable(items if warm else items[:COLD_ITEMS], requests[0])
    disk = [_disk_fault(rng) or f for f in plan.faults]
    model = MODELS[(index // 2) % len(MODELS)]  # --power mix: the odd iterations, every model
    return dataclasses.replace(plan, kills=items, faults=disk, power=model)


def _reachable(kills: list[Any], request: list[Step]) -> list[Any]:
    """A request of file writes and edits alone leaves no witness line, so its tool phase is
    never seen and a kill planned there would hold up every kill behind it: those land
    mid-stream in a generation instead."""
    if any(step.tool in ("bash", "mcp.witness") for step in request):
        return kills
    return [dataclasses.replace(k, phase="generate") if k.phase == "tool" else k for k in kills]


def _power(plan: IterationPlan, short: bool) -> IterationPlan:
    """The power iteration of `plan`: its own random stream, so kill plans stay as they were."""
    rng = random.Random(f"jmp-chaos-power:{plan.seed}:{plan.index}:{short}")
    model = MODELS[plan.index % len(MODELS)]
    cuts: list[Kill | Cut] = [_cut(rng) for _ in range(1 if short else rng.randint(1, 3))]
    kills = [] if short else plan.kills[: rng.randint(0, 2)]
    items = cuts + kills
    rng.shuffle(items)
    faults = [None if short else _disk_fault(rng) or f for f in plan.faults]
    return IterationPlan(
        plan.seed,
        plan.index,
        plan.requests,
        items,
        faults,
        plan.ack_direct,
        plan.keys,
        plan.warm,
        power=model,
    )


def aimed(plan: IterationPlan, cut: Cut, model: str | None = None) -> IterationPlan:
    """`plan` as a power iteration with this one cut and no other kill or fault: a cut aimed
    at one point (a reproducer, or a test)."""
    return dataclasses.replace(
        plan, kills=[cut], faults=[None] * len(plan.faults), power=model or plan.power or "strict"
    )


def parse_cut(spec: str) -> Cut:
    """`phase=fs,nth=1,kind=write,pattern=...,contains=...,timing=after,data=lose` -> Cut."""
    fields: dict[str, Any] = dict(part.split("=", 1) for part in spec.split(",") if part)
    for name in ("nth", "chunk", "seed"):
        if name in fields:
            fields[name] = int(fields[name])
    if "delay" in fields:
        fields["delay"] = float(fields["delay"])
    fields.setdefault("nth", 1)
    return Cut(**fields)


def _cut(rng: random.Random, quick: bool = False) -> Cut:
    phase = rng.choice(CUT_PHASES)
    data = rng.choice(DATA_VARIANTS)
    dirs = rng.choice(DIR_VARIANTS)
    seed = rng.getrandbits(32)
    if phase == "event":
        kind = rng.choice(RECURRING_KINDS if quick else EVENT_KINDS)
        nth = 1 if quick or kind in ("session", "run_started") else rng.randint(1, 3)
        return Cut("event", nth, kind=kind, data=data, dirs=dirs, seed=seed)
    if phase == "fs":
        op, pattern, contains, timing = rng.choice(QUICK_FS_POINTS if quick else FS_POINTS)
        nth = rng.randint(1, 2) if contains or "context" in pattern else rng.randint(1, 8)
        nth = 1 if quick else nth
        return Cut("fs", nth, op, pattern, contains, timing, data=data, dirs=dirs, seed=seed)
    if phase == "random":
        delay = round(rng.uniform(0.2, 3.0 if quick else 6.0), 2)
        return Cut("random", 1, delay=delay, data=data, dirs=dirs, seed=seed)
    soon = (1, 1, 1, 3) if quick else (1, 3, 2, 14)
    nth = rng.randint(*soon[:2]) if phase != "between" else rng.randint(*soon[2:])
    delay = round(rng.uniform(0.0, 0.15), 3)
    chunk = rng.randint(0, 6)
    return Cut(phase, nth, delay=delay, chunk=chunk, data=data, dirs=dirs, seed=seed)


def _disk_fault(rng: random.Random) -> Fault | None:
    if rng.random() < 0.85:
        return None
    kind = rng.choice(DISK_FAULTS)
    return Fault(kind, float(rng.randint(1, 10) if kind == "eio_fsync" else rng.randint(1, 40)))
