"""A task script whose tool returns a file's text as its outcome: a long text is cut to the
outcome's 1,200 characters (jev_harness/model.py) inside the script, before any redaction.

One tool, `cut.read(how)`, two options (so Jev is asked each time); the task completes once it
ran twice (so Jev is asked again after the first outcome).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jev_harness as jev


class CutKey(jev.Task):
    def __init__(self, inputs: dict[str, Any]) -> None:
        self.path = Path(inputs["file"])
        self.runs = 0
        super().__init__(verifier=lambda task: self.runs >= 2)
        ways = [jev.Option("quick", "the quick way"), jev.Option("thorough", "the thorough way")]
        how = jev.Parameter("how", "how to read it", lambda task, parents: ways)
        self.register(jev.Tool("cut.read", "read the file", (how,), self.read))

    def read(self, task: jev.Task, chosen: Any) -> jev.Outcome:
        self.runs += 1
        return jev.Outcome("ok", "read the file", text=self.path.read_text())


workflow = jev.TaskScript(CutKey)
