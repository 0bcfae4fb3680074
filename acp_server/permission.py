"""Uncertain calls ask the person: `session/request_permission` before a blocked session runs.

Allowing is exactly `--ack-interrupted` (acknowledge_pending=True: recorded, nothing re-run);
rejecting runs the prompt unacknowledged, so the turn ends `blocked` as the CLI's would; a
cancelled request (the client cancelled the turn) records nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from acp import RequestError, text_block, tool_content
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from acp_server.updates import title, tool_kind
from kernel.store.pending import CallRecord

if TYPE_CHECKING:
    from acp_server.server import JmpAcpAgent
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
    lines = [
        f"{record.started.tool} {record.started.target!r}: started, no recorded end; "
        "its effect is unknown and nothing re-ran it."
        for record in waiting
    ]
    first = waiting[0].started
    heading = title(first.tool, first.target, workspace)
    if len(waiting) > 1:
        heading = f"{len(waiting)} interrupted calls: {heading}, …"
    text = (
        "Interrupted, outcome unknown. "
        + " ".join(lines)
        + (" Acknowledge to continue with this uncertainty on record (as --ack-interrupted).")
    )
    return ToolCallUpdate(
        tool_call_id=first.call_id,
        title=f"Interrupted: {heading}",
        kind=tool_kind(first.tool),
        status="failed",
        content=[tool_content(text_block(text))],
    )


async def ask(server: JmpAcpAgent, handle: Handle, waiting: Sequence[CallRecord]) -> bool | None:
    """True: acknowledge; False: stop (still blocked); None: the client cancelled the turn."""
    client = server.client
    if client is None:
        return False
    try:  # redacted by the transport with the session's redactor, as every message of it
        reply = await client.request_permission(
            session_id=handle.id, tool_call=describe(waiting, handle), options=OPTIONS
        )
    except ConnectionError:
        return None
    except RequestError:  # a client that cannot ask: the safe answer is to stay blocked
        return False
    outcome = reply.outcome
    if isinstance(outcome, AllowedOutcome):
        return outcome.option_id == ACKNOWLEDGE
    return None
