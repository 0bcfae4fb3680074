"""The "ask before effect" seam: a front end may approve each effect before it starts.

`ToolStep._call` (kernel/loop/steps.py) asks `approve(call)` right before `tool_started` for
every call whose tool can have an effect (protocol/catalog.py: not `observes`). None means the
front end does not gate this call (nothing is recorded, as without a hook); an `Approval` is
recorded as an `approval` event first, then an allowed call starts, a rejected one is an
outcome the router sees, and a cancelled one ends the run `cancelled`. The CLI passes no hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.supervision.supervisor import Cancelled
from protocol.catalog import effect_of
from protocol.events import ApprovalData, ApprovalDecision, ApprovalScope

if TYPE_CHECKING:
    from kernel.store.session import Session


@dataclass(frozen=True)
class ProposedCall:
    """A validated call that has not started: what the person is asked about."""

    call_id: str
    tool: str
    target: str  # redacted and bounded, as `tool_started` will carry it
    arguments: dict[str, Any]  # the validated arguments (unredacted: what would run)


@dataclass(frozen=True)
class Approval:
    """The answer: `decision`, and `scope`/`asked` as the `approval` event records them."""

    decision: ApprovalDecision
    scope: ApprovalScope = "once"
    asked: bool = True


Approve = Callable[[ProposedCall], Approval | None]


def asked(
    session: Session, approve: Approve | None, cancel: threading.Event, call: ProposedCall
) -> bool:
    """True when the call may start: no hook, an observing tool, no gate, or allowed. The
    answer is recorded first; False: rejected. A cancel (the answer, or the Event set
    meanwhile) raises Cancelled with nothing started."""
    if approve is None or effect_of(call.tool) == "observes":
        return True
    answer = approve(call)
    if answer is None:
        return True
    session.append(
        ApprovalData(
            call_id=call.call_id,
            tool=call.tool,
            target=call.target,
            decision=answer.decision,
            scope=answer.scope,
            asked=answer.asked,
        ),
        durable=answer.decision != "allowed",  # an allowed one: tool_started's fsync
    )
    if answer.decision == "cancelled" or cancel.is_set():
        raise Cancelled(f"cancelled before {call.tool} started")
    return answer.decision != "rejected"
