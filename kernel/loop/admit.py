"""Admission of a new request: refused before it is recorded when it can never fit (issue 9).

Every request is pinned verbatim in each router projection of its session from then on. One
that cannot fit the router's budget would block that request and every later one (`--compact`
cannot trim pinned intent), so it is refused as a usage error that names the limit in bytes,
and nothing is written. The limit is JEV_CONTEXT_BYTES minus a fixed reserve: the route
question and the built-in tool list (MCP tools come on top at routing time), the session's
other pinned intent (earlier requests, the previous answer) and room for the status lines a
run adds. Lone surrogates (not representable in UTF-8) are cleaned first (protocol/text.py `clean`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel.context.policy import JEV_MAX_BYTES, ContextPolicy, pinned_text
from kernel.context.render import nbytes
from kernel.errors import UsageError
from kernel.loop import prompts
from protocol.codec import make_event
from protocol.events import Event, UserData

STATUS_ROOM = 1536  # bytes kept for the status lines (two rows and the last run end)
PROBE_ID = "0" * 32


def route_reserve() -> int:
    """Bytes of the route question and the built-in options, as the router request sends them."""
    return prompts.reserved_bytes(prompts.ROUTE_QUESTION, prompts.route_options({}))


def request_limit(policy: ContextPolicy, events: Sequence[Event], prompt: str) -> tuple[int, int]:
    """(the most bytes a new request may have in this session, the fixed reserve in bytes)."""
    room = policy.jev_bytes - route_reserve()
    seq = (events[-1].seq or 0) + 1 if events else 2
    probe = make_event(PROBE_ID, seq, 0.0, UserData(text=prompt))
    pinned = pinned_text(policy.state([*events, probe]), "router", cut_over=room)
    others = nbytes(pinned.head) + max(nbytes(pinned.status), STATUS_ROOM) + 4
    others += nbytes(pinned.current) - nbytes(prompt)  # the current request's own header
    return room - others, policy.jev_bytes - (room - others)


def check(policy: ContextPolicy, events: Sequence[Event], prompt: str) -> None:
    """UsageError, naming the limit, when this request can never fit the router's budget."""
    size = nbytes(prompt)
    limit, reserve = request_limit(policy, events, prompt)
    if size <= limit:
        return
    jev = policy.jev_bytes
    head = f"the request is {size:,} bytes (UTF-8)"
    if limit <= 0:
        what = "this session's pinned context" if events else "the routing question and tool list"
        fix = (
            "start a new session"
            if events
            else f"raise JEV_CONTEXT_BYTES (at most {JEV_MAX_BYTES:,})"
        )
        raise UsageError(
            f"{head}, but {what} already fills the router's budget "
            f"(JEV_CONTEXT_BYTES={jev:,}): nothing was recorded; {fix}"
        )
    more = ""
    if jev < JEV_MAX_BYTES:
        more = (
            f" (JEV_CONTEXT_BYTES can be raised to at most {JEV_MAX_BYTES:,}, which allows "
            f"{limit + JEV_MAX_BYTES - jev:,} bytes)"
        )
    raise UsageError(
        f"{head}; at most {limit:,} bytes fit the router's context here: JEV_CONTEXT_BYTES="
        f"{jev:,} minus {reserve:,} bytes for the routing question, the tool list and the "
        f"session's other pinned context{more}. Nothing was recorded: shorten the request, or "
        "put long material in a workspace file and refer to it"
    )
