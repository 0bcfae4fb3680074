"""The matrix's jev-harness task script: the untrusted code of the harness front ends.

A task script runs inside the harness worker, so it is to jev-harness what the model's shell is
to jmp. One tool, `probe.<mode>`, with one parameter `how` of two options (so that Jev is asked,
and a request body exists to check), run once; the task completes when it ran.

Inputs:
- `mode: "look"`: the operation runs `python -I PROBE OUT MARKER [ENV_FILE]`
  (tests/security/probe.py; ENV_FILE: `env_file`, the workspace's `.env`) and returns its
  stdout as the outcome text (which passes the harness's redactor).
- `mode: "hold"`: the operation appends a line to `effect`, writes `<hold>.started` (the
  worker's pid) and blocks reading the FIFO `hold`, so that a test can kill it mid-operation;
  with `browser` (a path), it first starts a real Chromium and writes its processes there.
- `mode: "touch"`: the operation appends a line to `effect` and returns (a power cut lands
  after the client was told of it).
- `mode: "write"`: the operation tries to create `target` (outside every directory a
  Landlocked run may write) and records the error it got in `OUT/unseen.json`.
- always: `configure` writes what the kernel gave the task (goal and secrets) to
  `OUT/configure.json` when `out` is set, which is what a script overriding it could keep;
  and `look` writes to `OUT/script.json` all the script's own process holds that it could
  keep: its inputs and goal, `os.environ`, `/proc/self/environ`, and every protocol message
  object still alive in the worker (found through the garbage collector).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jev_harness as jev


class ProbeTask(jev.Task):
    def __init__(self, inputs: dict[str, Any]) -> None:
        self.inputs = inputs
        self.ran = False
        super().__init__(verifier=lambda task: self.ran)
        mode = inputs["mode"]
        ways = [jev.Option("quick", "the quick way"), jev.Option("thorough", "the thorough way")]
        run = {"look": self.look, "hold": self.hold, "touch": self.touch, "write": self.write}[mode]
        how = jev.Parameter("how", "how to do it", lambda task, parents: ways)
        self.register(jev.Tool(f"probe.{mode}", f"the {mode} step", (how,), run))

    def configure(
        self, goal: str, limits: Any = None, redact: Any = None, secrets: Any = ()
    ) -> None:
        out = self.inputs.get("out")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            given = {"goal": goal, "secrets": [str(s) for s in secrets]}
            (Path(out) / "configure.json").write_text(json.dumps(given))
        super().configure(goal, limits, redact=redact, secrets=secrets)

    def look(self, task: jev.Task, chosen: Any) -> jev.Outcome:
        self.keep_what_the_process_holds()
        argv = [sys.executable, "-I", self.inputs["probe"], self.inputs["out"]]
        argv += [
            self.inputs["marker"],
            *([self.inputs["env_file"]] if "env_file" in self.inputs else []),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        self.ran = True
        # The outcome text keeps its first 1,200 characters: the encodings printed (probe.py),
        # the wrapped dumps of the whole file first, go first, and in full into the outcome's
        # data (the result artifact keeps it).
        # (The dumps go in as one text, as printed, and as the list of their lines, which the
        # redactor joins too.)
        lines = done.stdout.splitlines()
        at = [i for i, line in enumerate(lines) if line.startswith("DUMP ")]
        dumps = "".join(f"{line}\n" for line in lines[at[0] : at[-1] + 1]) if at else ""
        printed = [line for line in lines if line.startswith("ENC ")]
        text = dumps + "\n".join([*printed, done.stdout + done.stderr])
        return jev.Outcome(
            "ok",
            "probed",
            text=text,
            data={"dumps": dumps, "printed": printed, "dump_lines": dumps.splitlines()},
        )

    def keep_what_the_process_holds(self) -> None:
        try:
            with open("/proc/self/environ", "rb") as f:
                proc = f.read().decode("utf-8", "replace")
        except OSError as exc:
            proc = f"unreadable: {exc}"
        messages = [
            repr(obj)
            for obj in gc.get_objects()
            if str(getattr(type(obj), "__module__", "")).startswith("protocol.")
        ]
        held = {"inputs": self.inputs, "goal": self.goal, "environ": dict(os.environ)}
        held |= {"proc_environ": proc, "messages": messages}
        (Path(self.inputs["out"]) / "script.json").write_text(json.dumps(held, default=repr))

    def touch(self, task: jev.Task, chosen: Any) -> jev.Outcome:
        with open(self.inputs["effect"], "a") as f:
            f.write("ran\n")
        self.ran = True
        return jev.Outcome("ok", "touched", text="touched")

    def write(self, task: jev.Task, chosen: Any) -> jev.Outcome:
        try:
            with open(self.inputs["target"], "w") as f:
                f.write("escaped\n")
            error = ""
        except OSError as exc:
            error = exc.strerror or str(exc)
        (Path(self.inputs["out"]) / "unseen.json").write_text(json.dumps({"error": error}))
        self.ran = True
        return jev.Outcome("ok", "tried", text=error or "written")

    def hold(self, task: jev.Task, chosen: Any) -> jev.Outcome:
        if self.inputs.get("browser"):
            self.start_browser(self.inputs["browser"])
        with open(self.inputs["effect"], "a") as f:
            f.write("ran\n")
        hold = self.inputs["hold"]
        with open(hold + ".started", "w") as f:
            f.write(str(os.getpid()))
        with open(hold) as fifo:  # blocks until the test writes (or kills us)
            fifo.read()
        self.ran = True
        return jev.Outcome("ok", "held")

    def start_browser(self, record: str) -> None:
        """A real Chromium held open by the script (jev_harness.web.browser, as ChromiumProvider
        launches it); its processes (pid, start time) written to `record` for the row to find."""
        import psutil

        from jev_harness.web.browser import Browser

        self.browser = Browser()
        self.browser.start()
        procs = psutil.Process().children(recursive=True)
        with open(record, "w") as f:
            json.dump([[p.pid, p.create_time(), " ".join(p.cmdline())[:80]] for p in procs], f)


workflow = jev.TaskScript(ProbeTask)
