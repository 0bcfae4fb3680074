"""A session writer process for lock and kill tests.

    python -m tests.fakes.writer HOME SESSION_ID COUNT

Opens the session (exit 2 with the error on stderr if it is locked), prints `locked PID`,
appends COUNT tool_started records (forever if COUNT is 0, printing `appended N` every 100,
once the N are durable), then prints `done` and holds the lock until stdin closes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernel.errors import JmpError
from kernel.store.session import Session
from protocol.events import ToolStartedData


def main(argv: list[str]) -> int:
    home, session_id, count = Path(argv[0]), argv[1], int(argv[2])
    durable = os.environ.get("WRITER_DURABLE") == "1"
    try:
        session = Session.open(home, session_id)
    except JmpError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    print(f"locked {os.getpid()}", flush=True)
    n = 0
    while count == 0 or n < count:
        n += 1
        session.append(record(n), durable=durable)
        if n % 100 == 0:
            session.sync()  # durable before it is said
            print(f"appended {n}", flush=True)
    session.sync()
    print("done", flush=True)
    sys.stdin.read()  # hold the lock until the test lets go
    session.close()
    return 0


def record(n: int) -> ToolStartedData:
    """A tool_started record of realistic size (about 400 bytes)."""
    return ToolStartedData(
        call_id=f"call-{n:06d}",
        tool="bash",
        target="pytest -q tests/kernel/test_session.py -k 'lock and not slow' --maxfail=1",
        request=f"artifacts/call-{n:06d}-request.json",
        arguments='{"command": "pytest -q tests/kernel/test_session.py -k \'lock and not slow\' '
        '--maxfail=1", "is_input": false, "timeout": 120.0}' + " " * 80,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
