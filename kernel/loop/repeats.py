"""Three identical outcomes in a row pause the run (CONTRACT section 6) rather than loop: tool
errors, arguments that failed validation, and calls the person rejected (kernel/loop/approval.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel.context.state import REJECTED_TEXT
from protocol.events import ApprovalData, ErrorData, Event, ToolFinishedData, UserData

REPEATED_ERRORS = 3  # identical tool errors in a row that pause the run (CONTRACT section 6)


def repeated_error(events: Sequence[Event]) -> str | None:
    """The error text when the last three outcomes of this request are identical errors."""
    outcomes: list[tuple[str, str] | None] = []
    for event in events:
        data = event.data
        if isinstance(data, UserData):
            outcomes = []
        elif isinstance(data, ToolFinishedData):
            failed = data.status == "error"
            outcomes.append((data.tool, data.error or data.text) if failed else None)
        elif isinstance(data, ErrorData) and data.error_class == "InvalidArguments":
            outcomes.append(("arguments", data.message))
        elif isinstance(data, ApprovalData) and data.decision == "rejected":
            outcomes.append((data.tool, f"{data.target!r} {REJECTED_TEXT}"))
    last = outcomes[-REPEATED_ERRORS:]
    if len(last) == REPEATED_ERRORS and last[0] is not None and all(o == last[0] for o in last):
        return f"{last[0][0]}: {last[0][1]}"
    return None
