"""Per-step cost of jmp's agent loop vs. the OpenHands SDK's own loop, zero-latency models.

Both loops run in this process against loopback servers (JevServer, FlashServer) and do the
same no-op step: view a tiny file. jmp: Jev routes `read`, Flash writes `{"path"}`, the tool
worker runs it, with fsync on. OpenHands: a real `LLM` (litellm, chat completions) pointed at
a FlashServer that names its scripted calls `file_editor`, FileEditorTool in-process, events
persisted to a directory. Start-up is excluded: each side does a warm-up round first. Rounds
of N steps alternate between the two (the machine is shared), and a step is the time between
consecutive tool results (jmp `tool_finished`, OpenHands `ObservationEvent`).
`python -m bench.agent --profile` prints jmp's top kernel-side costs (cProfile) instead.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer

N = 20  # steps per round
ROUNDS = 5  # measured rounds per side, interleaved
GOAL = 0.5  # jmp per-step time at most this fraction of OpenHands'
# jmp phases of one step, named by the event that ends each (the previous one starts it).
PHASES = (
    ("tool_finished", "model_started", "project for route"),
    ("model_started", "usage", "route: Jev via router worker"),
    ("usage", "model_started", "route event, project for generate"),
    ("model_started", "usage", "generate: Flash via generator worker"),
    ("usage", "tool_started", "validate, request artifact, fsync append"),
    ("tool_started", "tool_finished", "tool call via worker, result artifacts"),
)


def intervals(stamps: list[float]) -> list[float]:
    """Milliseconds between consecutive timestamps."""
    return [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]


class JmpSide:
    """One jmp session (Session, Models, Tools, Agent) driven through the Python boundary."""

    name = "jmp"

    def __init__(self, base: Path) -> None:
        from main import Agent, Models, Session, Settings, Tools, instructions

        self.workspace = base / "jws"
        self.workspace.mkdir()
        (self.workspace / "tiny.txt").write_text("x\n")
        self.jev, self.flash = JevServer(), FlashServer()
        env = {
            "TYPESAFE_API_KEY": "jev-bench-key-0123456789",
            "TYPESAFE_BASE_URL": self.jev.url,
            "FLASH_API_KEY": "sk-flash-bench-0123456789",
            "FLASH_BASE_URL": self.flash.url,
        }
        self.events: list[tuple[float, Any]] = []
        session = Session.create(base / "home", self.workspace, on_event=self._seen)
        models = Models(session, Settings.environment(env))
        tools = Tools(self.workspace, session.directory / "terminal", None)
        self.agent = Agent(session, models, tools, instructions=instructions())

    def _seen(self, event: Any) -> None:
        self.events.append((time.perf_counter(), event))

    def round(self, n: int) -> list[tuple[float, Any]]:
        """n `read` steps then done; the events of this round with their arrival times."""
        self.jev.script(
            [{"route": "read"}] * n + [{"route": "done"}, {"completion_review": "complete"}]
        )
        self.flash.queue([{"tool_call": {"arguments": {"path": "tiny.txt"}}}] * n)
        self.flash.queue([{"text": "Viewed it."}])
        first = len(self.events)
        result = self.agent.run(prompt=f"view tiny.txt {n} times")
        if result["status"] != "completed":
            raise RuntimeError(f"jmp round ended {result['status']}: {result['summary']}")
        return self.events[first:]

    def steps(self, events: list[tuple[float, Any]]) -> list[float]:
        return intervals([t for t, e in events if e.kind == "tool_finished"])

    def close(self) -> None:
        self.agent.close()
        self.jev.close()
        self.flash.close()


def jmp_phases(events: list[tuple[float, Any]]) -> dict[str, list[float]]:
    """Per-phase milliseconds of every full step (tool_finished to tool_finished), by when
    the kernel appended each record (its `time`): announcements come in groups, once an fsync
    covered them (kernel/store/commit.py), so their arrival times say when a round ended,
    not where the step spent its time."""
    seen = [(e.time, e) for _, e in events if e.kind != "model_progress"]
    out: dict[str, list[float]] = {label: [] for *_, label in PHASES}
    model = out.setdefault("model calls, worker-side (usage.seconds)", [])
    ends = [i for i, (_, e) in enumerate(seen) if e.kind == "tool_finished"]
    for at in ends[:-1]:
        spent = 0.0
        for begin, end, label in PHASES:
            assert seen[at][1].kind == begin, [e.kind for _, e in seen[at : at + 3]]
            nxt = next(j for j in range(at + 1, len(seen)) if seen[j][1].kind == end)
            out[label].append((seen[nxt][0] - seen[at][0]) * 1000)
            if end == "usage":
                spent += seen[nxt][1].data.seconds * 1000
            at = nxt
        model.append(spent)
    return out


class OpenHandsSide:
    """One OpenHands Conversation (Agent + LLM via litellm + FileEditorTool), persisted."""

    name = "OpenHands"

    def __init__(self, base: Path) -> None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
        from openhands.sdk import LLM, Agent, Conversation, Tool
        from openhands.tools.file_editor import FileEditorTool

        logging.getLogger("openhands").setLevel(logging.WARNING)
        self.workspace = base / "ows"
        self.workspace.mkdir()
        (self.workspace / "tiny.txt").write_text("x\n")
        self.flash = FlashServer()
        # a mapped model name keeps litellm on its ordinary path (cost lookup succeeds)
        self.llm = LLM(
            model="openai/gpt-4o-mini",
            base_url=self.flash.url,
            api_key="sk-bench-dummy",
            usage_id="agent",
            num_retries=0,
        )
        agent = Agent(llm=self.llm, tools=[Tool(name=FileEditorTool.name)])
        self.events: list[tuple[float, Any]] = []
        self.conversation = Conversation(
            agent=agent,
            workspace=str(self.workspace),
            persistence_dir=str(base / "oh-conversations"),
            callbacks=[self._seen],
            visualizer=None,
            stuck_detection=False,  # the same call N times is the point here
        )
        self.calls = 0

    def _seen(self, event: Any) -> None:
        self.events.append((time.perf_counter(), event))

    def round(self, n: int) -> list[tuple[float, Any]]:
        path = str(self.workspace / "tiny.txt")
        items = []
        for _ in range(n):
            self.calls += 1
            call = {"name": "file_editor", "id": f"call_{self.calls}"}
            items.append({"tool_call": {**call, "arguments": {"command": "view", "path": path}}})
        self.flash.queue([*items, {"text": "Viewed it."}])
        first = len(self.events)
        self.conversation.send_message(f"view tiny.txt {n} times")
        self.conversation.run()
        got = self.events[first:]
        observed = sum(type(e).__name__ == "ObservationEvent" for _, e in got)
        if observed != n:
            raise RuntimeError(f"OpenHands round made {observed} observations, not {n}")
        return got

    def steps(self, events: list[tuple[float, Any]]) -> list[float]:
        return intervals([t for t, e in events if type(e).__name__ == "ObservationEvent"])

    def model_ms(self, since: int) -> list[float]:
        """litellm response latencies (ms) recorded by the LLM's metrics after `since`."""
        return [r.latency * 1000 for r in self.llm.metrics.response_latencies[since:]]

    def close(self) -> None:
        self.conversation.close()
        self.flash.close()


def measure(n: int = N, rounds: int = ROUNDS) -> dict[str, Any]:
    """Warm both sides, then alternate measured rounds; raw per-step samples per side."""
    base = Path(tempfile.mkdtemp(prefix="jba", dir="/tmp"))
    sides: list[Any] = []
    out: dict[str, Any] = {"jmp": [], "OpenHands": [], "phases": {}, "oh_model": []}
    out.update(walls={"jmp": [], "OpenHands": []}, n=n, rounds=rounds)
    out["by_round"] = {"jmp": [], "OpenHands": []}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for make in (JmpSide, OpenHandsSide):
                sides.append(make(base))  # one by one: a failed second still closes the first
            for side in sides:
                side.round(3)  # warm-up: worker start-up, imports, first connections
            for r in range(rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    _one_round(side, n, out)
    finally:
        for side in sides:
            side.close()
        shutil.rmtree(base, ignore_errors=True)
    return out


def _one_round(side: Any, n: int, out: dict[str, Any]) -> None:
    latencies = len(side.llm.metrics.response_latencies) if side.name == "OpenHands" else 0
    began = time.perf_counter()
    events = side.round(n)
    out["walls"][side.name].append((time.perf_counter() - began) * 1000 / n)
    steps = side.steps(events)
    out[side.name].extend(steps)
    out["by_round"][side.name].append(statistics.median(steps))
    if side.name == "jmp":
        for label, values in jmp_phases(events).items():
            out["phases"].setdefault(label, []).extend(values)
    else:
        out["oh_model"].extend(side.model_ms(latencies)[:n])


def table(data: dict[str, Any]) -> str:
    """The printable result: medians, the ratio, the goal, jmp's phase split."""
    med: Callable[[list[float]], float] = statistics.median
    jmp, oh = med(data["jmp"]), med(data["OpenHands"])
    ratio = jmp / oh
    oh_model = med(data["oh_model"]) if data["oh_model"] else float("nan")
    jmp_model = med(data["phases"]["model calls, worker-side (usage.seconds)"])
    rows = [
        "| loop | median ms/step | p90 | first round | last round | wall / N | model call ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, model in (("jmp", jmp_model), ("OpenHands", oh_model)):
        samples = sorted(data[name])
        p90 = samples[int(0.9 * (len(samples) - 1))]
        first, last = data["by_round"][name][0], data["by_round"][name][-1]
        rows.append(
            f"| {name} | {med(samples):.1f} | {p90:.1f} | {first:.1f} | {last:.1f} "
            f"| {med(data['walls'][name]):.1f} | {model:.1f} |"
        )
    verdict = "met" if ratio <= GOAL else "NOT met"
    rows += [
        "",
        f"jmp/OpenHands per step: {ratio:.2f}x (goal <= {GOAL}x: {verdict}); "
        f"N={data['n']} steps x {data['rounds']} interleaved rounds per side",
        "by history depth: first measured round "
        f"{data['by_round']['jmp'][0] / data['by_round']['OpenHands'][0]:.2f}x, last round "
        f"{data['by_round']['jmp'][-1] / data['by_round']['OpenHands'][-1]:.2f}x "
        "(OpenHands re-sends and re-transforms the whole history each step)",
        f"model share of a step: jmp {jmp_model / jmp:.0%} (route + generate, worker-side), "
        f"OpenHands {oh_model / oh:.0%} (litellm latency)",
        "",
        "| jmp phase (tool_finished to tool_finished) | median ms |",
        "|---|---|",
    ]
    rows += [f"| {label} | {med(v):.2f} |" for label, v in data["phases"].items() if v]
    return "\n".join(rows)


def run() -> str:
    return table(measure())


def profile(sort: str = "cumulative", n: int = N, rounds: int = 3) -> str:
    """cProfile of the kernel side (this process) over jmp rounds only: the top 40 by `sort`."""
    import cProfile
    import io
    import pstats

    base = Path(tempfile.mkdtemp(prefix="jbp", dir="/tmp"))
    side = JmpSide(base)
    try:
        side.round(3)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(rounds):
            side.round(n)
        profiler.disable()
    finally:
        side.close()
        shutil.rmtree(base, ignore_errors=True)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats(sort).print_stats(40)
    return text.getvalue()


if __name__ == "__main__":
    args = sys.argv[1:]
    print(profile(*args[1:2]) if args[:1] == ["--profile"] else run())
