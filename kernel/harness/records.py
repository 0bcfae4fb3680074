"""What a harness operation's end puts into the ledger: its `Outcome`, its receipt.

The ledger (kernel/run/ledger.py) writes `tool_finished` and its artifacts exactly as for an
agent call; a reply that carries a receipt is followed by a `receipt` record (docs/HARNESS.md
section 5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernel.run.ledger import Outcome
from protocol.events import ReceiptData
from protocol.harness import Operated, Receipt

if TYPE_CHECKING:
    from kernel.store.session import Session


def outcome(reply: Operated) -> Outcome:
    """An operation's reply as the ledger's Outcome: the output text opens with its summary."""
    shown = reply.text.startswith(reply.summary)  # the text may open with its summary already
    text = reply.text if shown else "\n".join(filter(None, [reply.summary, reply.text]))
    return Outcome(
        status=reply.status,
        text=text,
        result={**reply_fields(reply), "data": reply.data},
        error=reply.error,
        seconds=reply.seconds,
        target=reply.target,
    )


def record_receipt(session: Session, call_id: str, receipt: Receipt) -> None:
    """The `receipt` record after the operation that saved the report."""
    session.append(ReceiptData(call_id=call_id, **receipt_fields(receipt)))


def reply_fields(reply: Operated) -> dict[str, Any]:
    """What an operation answered, as its result artifact and a direct caller see it."""
    return {
        "status": reply.status,
        "summary": reply.summary,
        "text": reply.text,
        "error": reply.error,
        "source": reply.source,
        "target": reply.target,
    }


def receipt_fields(receipt: Receipt) -> dict[str, Any]:
    """A receipt as the `receipt` record's fields."""
    return {
        "path": receipt.path,
        "exists": receipt.exists,
        "match": receipt.match,
        "record_count": receipt.record_count,
        "digest": receipt.digest,
        "sources": list(receipt.sources),
        "verdict": receipt.verdict,
    }
