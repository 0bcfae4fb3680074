"""Uncertain calls ask the person: `session/request_permission` before a blocked session runs.

Allowing is exactly `--ack-interrupted` (acknowledge_pending=True: recorded, nothing re-run);
rejecting runs the prompt unacknowledged, so the turn ends `blocked` as the CLI's would; a
cancelled request (the client cancelled the turn) records nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from acp import RequestError, text_block, tool_content
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from acp_server.modes import CANCEL_GRACE_S, CANCELLED_REQUEST, WAIT_POLL_S
from acp_server.updates import title, tool_kind
from kernel.store.pending import CallRecord, cause_of

if TYPE_CHECKING:
    from acp_server.sender import Sender
    from acp_server.sessions import Handle

ACKNOWLEDGE = "acknowledge"
STOP = "stop"
OPTIONS = [
    PermissionOption(
        option_id=ACKNOWLEDGE,
        name="Acknowledge and continue (nothing is re-run)",
        kind="allow_once",
    ),
    PermissionOption(option_id=STOP, name="Stop (the session stays blocked)", kind="reject_once"),
]


def describe(waiting: Sequence[CallRecord], handle: Handle) -> ToolCallUpdate:
    """One request naming every uncertain call: its tool and command or target."""
    workspace = handle.session.workspace
    lines = [f"{r.started.tool} {r.started.target!r}: {_why(r)}" for r in waiting]
    first = waiting[0].started
    heading = title(first.tool, first.target, workspace)
    if len(waiting) > 1:
        heading = f"{len(waiting)} interrupted calls: {heading}, …"
    text = (
        "Interrupted, outcome unknown. "
        + " ".join(lines)
        + " Acknowledge to continue with this uncertainty on record (nothing is re-run)."
    )
    return ToolCallUpdate(
        tool_call_id=first.call_id,
        title=f"Interrupted: {heading}",
        kind=tool_kind(first.tool),
        status="failed",
        content=[tool_content(text_block(text))],
    )


def _why(record: CallRecord) -> str:
    """How this call was stopped (kernel/loop/resume.py: cause_of), and that nothing re-ran."""
    cause = cause_of(record)
    if cause == "cancelled":
        return (
            "you cancelled it before it finished; what it did until then is unknown and "
            "nothing re-ran it."
        )
    if cause == "worker_exit":
        mcp = record.uncertain is not None and record.uncertain.mcp_server
        died = "an MCP server died" if mcp else "the tool worker died"
        return f"{died} during it; its effect is unknown and nothing re-ran it."
    return (
        "started, no recorded end (jmp was stopped during it); its effect is unknown and "
        "nothing re-ran it."
    )


async def ask(sender: Sender, handle: Handle, waiting: Sequence[CallRecord]) -> bool | None:
    """True: acknowledge; False: stop (still blocked); None: the turn was cancelled (the
    client answered `cancelled`, or did not within CANCEL_GRACE_S of a cancel or close), or
    the client is going."""
    client = sender.client
    if client is None:
        return False
    # Redacted by the transport with the session's redactor, as every message of it.
    asking = asyncio.ensure_future(
        client.request_permission(
            session_id=handle.id, tool_call=describe(waiting, handle), options=OPTIONS
        )
    )
    cancelled_at: float | None = None
    while not asking.done():
        await asyncio.wait({asking}, timeout=WAIT_POLL_S)
        if not asking.done() and handle.agent.cancel.is_set():
            cancelled_at = cancelled_at or time.monotonic()
            if time.monotonic() - cancelled_at > CANCEL_GRACE_S:
                asking.cancel()
                return None
    try:
        reply = asking.result()
    except ConnectionError:
        return None
    except RequestError as exc:  # ours at shutdown; else a client that cannot ask: stay blocked
        return None if exc.code == CANCELLED_REQUEST else False
    outcome = reply.outcome
    if isinstance(outcome, AllowedOutcome):
        return outcome.option_id == ACKNOWLEDGE
    return None
