"""Synthetic sessions for context and recall tests: real protocol events, in-memory artifacts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from protocol.codec import make_event
from protocol.events import (
    Data,
    ErrorData,
    Event,
    FinalData,
    RouteData,
    ToolFinishedData,
    ToolStartedData,
    ToolUncertainData,
    UserData,
)

SESSION_ID = "ab" * 16
WORDS = ["alpha", "beta", "gamma", "delta", "parser", "config", "cache", "löwe", "数据", "🚀"]


@dataclass
class Log:
    """An event list under construction plus the artifacts its records point to."""

    events: list[Event] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    calls: int = 0

    def add(self, data: Data) -> Event:
        event = make_event(SESSION_ID, len(self.events) + 1, 1789670000.0, data)
        self.events.append(event)
        return event

    def read(self, rel: str) -> str:
        return self.artifacts[rel]

    def user(self, text: str) -> None:
        self.add(UserData(text=text))

    def final(self, summary: str, status: str = "completed") -> None:
        self.add(FinalData(status=status, summary=summary))  # type: ignore[arg-type]

    def start(self, tool: str, target: str, arguments: str = "") -> str:
        self.calls += 1
        call_id = f"c{self.calls}"
        self.add(
            ToolStartedData(
                call_id=call_id,
                tool=tool,
                target=target,
                request=f"artifacts/{call_id}-request.json",
                arguments=arguments,
            )
        )
        return call_id

    def finish(
        self, call_id: str, tool: str, output: str, status: str = "ok", exit_code: int | None = 0
    ) -> None:
        rel = f"artifacts/{call_id}-output.txt"
        self.artifacts[rel] = output
        self.add(
            ToolFinishedData(
                call_id=call_id,
                tool=tool,
                status=status,  # type: ignore[arg-type]
                exit_code=exit_code,
                text=output[:2000],
                artifact=f"artifacts/{call_id}-result.json",
                full_output=rel,
            )
        )

    def call(self, tool: str, target: str, output: str, **kw: object) -> str:
        args = kw.pop("arguments", "")
        call_id = self.start(tool, target, str(args))
        self.finish(call_id, tool, output, **kw)  # type: ignore[arg-type]
        return call_id

    def read_file(self, path: str, view_range: list[int] | None, content: str) -> str:
        extra = f',"view_range":[{view_range[0]},{view_range[1]}]' if view_range else ""
        args = '{"command":"view","path":"' + path + '"' + extra + "}"
        return self.call("read", path, content, arguments=args)

    def uncertain(self, call_id: str, tool: str, acknowledged: bool = False) -> None:
        self.add(
            ToolUncertainData(
                call_id=call_id,
                tool=tool,
                cause="worker_exit",
                acknowledged=acknowledged,
                note="worker died",
            )
        )


_CORPUS = " ".join(random.Random(0).choice(WORDS) for _ in range(80_000))


def text_of(rng: random.Random, words: int) -> str:
    """About `words` words: a random slice of a fixed corpus (fast for huge outputs)."""
    if words <= 8:
        return " ".join(rng.choice(WORDS) for _ in range(words))
    size = min(words * 6, len(_CORPUS))
    start = rng.randrange(0, len(_CORPUS) - size + 1)
    return _CORPUS[start : start + size]


def synthetic(n_events: int, seed: int = 1, big_every: int = 0, request_rate: float = 0.02) -> Log:
    """A session of about `n_events` events: requests, answers, reads, edits, shells, errors."""
    rng = random.Random(seed)
    log = Log()
    request = 0
    while len(log.events) < n_events:
        roll = rng.random()
        if roll < request_rate or not log.events:
            request += 1
            log.user(f"request {request}: fix the {text_of(rng, 4)} ✨ 修复")
        elif roll < 0.02 + request_rate:
            log.final(f"answer {request}: done with {text_of(rng, 6)}")
        elif roll < 0.03 + request_rate:
            log.add(ErrorData(stage="route", error_class="ProviderError", message="503 " * 40))
        elif roll < 0.06 + request_rate:
            log.add(RouteData(choice="bash", confidence=0.9, context_bytes=100, probabilities={}))
        else:
            tool = rng.choice(["read", "bash", "edit", "write", "mcp.search", "read"])
            size = rng.choice([10, 200, 3000])
            if big_every and rng.random() < 1 / big_every:
                size = 200_000
            output = text_of(rng, size // 6)
            status = "error" if rng.random() < 0.1 else "ok"
            path = f"src/m{rng.randint(0, 20)}.py"
            if tool == "read":
                log.read_file(path, [1, rng.randint(2, 50)], output)
            else:
                log.call(tool, path if tool != "bash" else "pytest -q", output, status=status)
    return log
