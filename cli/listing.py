"""`jmp --list` output: one `sessions` JSON line, or a table. Little imported, for a fast start."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TextIO

from kernel.store.catalog import SessionInfo


def sessions_line(infos: list[SessionInfo]) -> str:
    """The single JSON line `--list --json` prints (the contract's shape, nothing added),
    through the front ends' one writer (kernel/display.py `json_line`)."""
    from kernel.display import json_line
    from kernel.store.redact import Redactor, environment_secrets

    sessions = [info.to_dict() for info in infos]
    return json_line("sessions", {"sessions": sessions}, Redactor(environment_secrets()))


def table(infos: list[SessionInfo]) -> str:
    """A readable table, most recent first: id, workspace (~ for your home), status, records,
    last activity and title, as docs/JMP.md lists them."""
    if not infos:
        return "no sessions yet"
    rows = [("SESSION", "WORKSPACE", "STATUS", "EVENTS", "LAST ACTIVITY", "TITLE")]
    for info in infos:
        when = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(info.last_activity))
            if info.last_activity
            else "-"
        )
        row = (info.session_id, _home_short(info.workspace), info.status, str(info.events), when)
        rows.append((*row, info.title))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True))
        + "  "
        + row[5]
        for row in rows
    )


def _home_short(path: str) -> str:
    """`~/src/project` for a path under $HOME: the column stays readable."""
    home = os.environ.get("HOME", "")
    if home not in ("", "/") and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return path or "-"


def print_sessions(
    infos: list[SessionInfo], as_json: bool, home: Path | None = None, out: TextIO | None = None
) -> None:
    """Print the listing to stdout; the readable one ends saying where sessions live."""
    out = out or sys.stdout
    if as_json:
        text = sessions_line(infos)
    else:
        from kernel.display import terminal_safe

        where = "" if home is None else f"\nsessions are kept in {home}"
        text = terminal_safe(table(infos) + where)  # a title or a path may carry escapes
    out.write(text + "\n")
    out.flush()
