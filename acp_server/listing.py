"""`session/list`: the catalog's rows as ACP SessionInfo, most recent first."""

from __future__ import annotations

import datetime
from pathlib import Path

from acp.schema import SessionInfo

from kernel.store.catalog import SessionInfo as Row

UNTITLED = "New session (no prompt yet)"  # a session is titled by its first request


def session_infos(rows: list[Row], cwd: str | None) -> list[SessionInfo]:
    """Every session (of cwd's workspace when cwd is given), with its title and last activity."""
    wanted = Path(cwd).resolve() if cwd else None
    infos = []
    for row in rows:
        if not row.workspace or (wanted is not None and Path(row.workspace) != wanted):
            continue
        when = (
            datetime.datetime.fromtimestamp(row.last_activity, datetime.UTC).isoformat()
            if row.last_activity
            else None
        )
        infos.append(
            SessionInfo(
                session_id=row.session_id,
                cwd=row.workspace,
                title=row.title or UNTITLED,
                updated_at=when,
            )
        )
    return infos
