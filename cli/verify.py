"""`jmp --session ID --verify`: check every line of a session's log now (issue 25).

Opening a session reads only the ends of its log (kernel/store/event_log.py); this reads and
checks all of it, as every open did before: each line decodes, follows in seq and is this
session's, and each verified prefix still has the digest events.index recorded. Exit 0 with
one line saying how many records were checked; a damaged log is the usual error (exit 2).
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def verify(home: Path, session_id: str, as_json: bool) -> int:
    from kernel.store.session import Session

    started = time.monotonic()
    with Session.open(home, session_id, verify=True) as session:
        records = len(session.events)
        size = (session.directory / "events.jsonl").stat().st_size
    seconds = time.monotonic() - started
    if as_json:
        line = {"session_id": session_id, "records": records, "bytes": size, "ok": True}
        print(json.dumps({"type": "verified", **line}), flush=True)
    else:
        print(
            f"session {session_id}: all {records} records of its log ({size} bytes) check out "
            f"({seconds:.1f} s)",
            flush=True,
        )
    return 0
