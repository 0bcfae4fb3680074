"""A plain jev-harness task for plumbing tests: pick items until the target is picked.

Inputs: `items` (ids), `target` (the id that completes the task), optional `hold` (a path: the
`pick` of `hold_item` writes `<hold>.started`, then blocks reading the FIFO at `hold`, so a test
can kill the worker mid-operation), optional `fail_build` (build raises).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import jev_harness as jev


class Items(jev.Toolkit):
    name = "items"

    def __init__(self, items: list[str], hold: str | None, hold_item: str | None) -> None:
        self.items, self.hold, self.hold_item = items, hold, hold_item
        self.picked: list[str] = []

    def observe(self) -> dict[str, Any]:
        return {"picked": list(self.picked)}

    def install(self, task: jev.Task) -> None:
        def domain(task: jev.Task, parents: Any) -> list[jev.Option]:
            return [
                jev.Option(i, f"the item called {i}", value=i)
                for i in self.items
                if i not in self.picked
            ]

        def run(task: jev.Task, chosen: Any) -> jev.Outcome:
            item = chosen["item"].value
            if self.hold and item == self.hold_item:
                with open(self.hold + ".started", "w") as f:
                    f.write(str(os.getpid()))
                with open(self.hold) as fifo:  # blocks until the test writes (or kills us)
                    fifo.read()
            self.picked.append(item)
            return jev.Outcome("ok", f"picked {item}", text=f"item {item} is now picked")

        task.register(
            jev.Tool(
                "items.pick",
                "pick one item",
                (jev.Parameter("item", "the item to pick", domain, selection="explore"),),
                run,
            )
        )

        def note_domain(task: jev.Task, parents: Any) -> list[jev.Option]:
            return [jev.Option(i, f"note about {i}") for i in self.picked]

        task.register(
            jev.Tool(
                "items.note",
                "write a note about a picked item",
                (jev.Parameter("item", "the picked item", note_domain),),
                lambda task, chosen: jev.Outcome("ok", "noted"),
            )
        )


def env_tool() -> jev.Tool:
    """A parameterless tool that reports which model keys the harness worker can see."""

    def run(task: jev.Task, chosen: Any) -> jev.Outcome:
        seen = [k for k in ("TYPESAFE_API_KEY", "FLASH_API_KEY") if k in os.environ]
        return jev.Outcome("ok", f"keys seen: {seen}")

    return jev.Tool("env.keys", "report the model keys in the environment", (), run)


def build(inputs: dict[str, Any]) -> jev.Task:
    if inputs.get("fail_build"):
        raise ValueError("this build fails on purpose")
    if inputs.get("hang_build"):  # a build that never returns: the run's timeout stops it
        import threading

        threading.Event().wait()
    if inputs.get("print_env"):  # what a careless script prints must still be redacted
        print("camofox key:", os.environ.get("CAMOFOX_ACCESS_KEY"), flush=True)
        print("camofox key:", os.environ.get("CAMOFOX_ACCESS_KEY"), file=sys.stderr, flush=True)
        with open(inputs["print_env"]) as f:  # a file that holds a key (the worker has none)
            found = f.read().strip()
        print("the file says:", found, flush=True)
        print("the file says:", found, file=sys.stderr, flush=True)
    kit = Items(list(inputs["items"]), inputs.get("hold"), inputs.get("hold_item"))
    task = jev.Task([kit], verifier=lambda task: inputs["target"] in kit.picked)
    if inputs.get("env_probe"):
        task.register(env_tool())
    return task


workflow = jev.TaskScript(build)
