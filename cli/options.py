"""The validated options of one run invocation, as cli.run receives them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Options:
    """One run: a new task, a follow-up, a replay, a compaction or an acknowledgement."""

    prompt: str | None = None
    json: bool = False
    workspace: Path | None = None  # resolved; None: the current directory or the bound one
    no_mcp: bool = False
    session: str | None = None
    compact: bool = False
    ack_interrupted: bool = False
    sessions_dir: str | None = None  # as given; kernel.store.session.sessions_home resolves it
