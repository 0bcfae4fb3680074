"""The commands a person can type in an editor (`available_commands_update`), and reading one
from a prompt.

- `/compact`: local compaction, no model call (the CLI's `--compact`);
- `/acknowledge`: acknowledge the calls whose outcome is unknown and go on (the CLI's
  `--ack-interrupted`), offered only while the session has such a call;
- `/mode auto|ask`: switch the session's mode (as `session/set_mode`).

A prompt is a command only when its text is exactly `/name` or `/name argument` for one of
these names; any other text (a path such as `/usr/bin/env`) is an ordinary request.
"""

from __future__ import annotations

from dataclasses import dataclass

from acp.helpers import update_available_commands
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    UnstructuredCommandInput,
)

COMPACT, ACKNOWLEDGE, MODE = "compact", "acknowledge", "mode"
NAMES = (COMPACT, ACKNOWLEDGE, MODE)


@dataclass(frozen=True)
class Command:
    name: str
    argument: str = ""


def available(unsettled: bool) -> list[AvailableCommand]:
    """What this session can do now (`acknowledge` only while a call's outcome is unknown)."""
    commands = [
        AvailableCommand(
            name=COMPACT,
            description="Compact this session's context now (local, no model call)",
        )
    ]
    if unsettled:
        commands.append(
            AvailableCommand(
                name=ACKNOWLEDGE,
                description="Acknowledge the interrupted calls (their outcome is unknown; "
                "nothing is re-run) and continue",
            )
        )
    commands.append(
        AvailableCommand(
            name=MODE,
            description="Switch the mode: auto (run without asking) or ask (ask before changes)",
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint="auto or ask")),
        )
    )
    return commands


def update(unsettled: bool) -> AvailableCommandsUpdate:
    return update_available_commands(available(unsettled))


def parse(text: str) -> Command | None:
    """The command a prompt's text is, or None for an ordinary request."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, argument = stripped[1:].partition(" ")
    if name not in NAMES or "\n" in name:
        return None
    return Command(name, argument.strip())
