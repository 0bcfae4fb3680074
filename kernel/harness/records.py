"""The records of one harness operation's end: `tool_finished` (+ `receipt`) or `tool_uncertain`.

`tool_uncertain` is fsynced before anything else happens (the operation's effect is unknown and
it is never re-run); `tool_finished` and its artifacts are flushed, not fsynced, like the
agent's.
"""

from __future__ import annotations

from typing import Any

from protocol.events import ReceiptData, ToolFinishedData, ToolUncertainData
from protocol.harness import Operated, Receipt

PREVIEW_CHARS = 2_000


def record_uncertain(
    session: Any,
    call_id: str,
    tool: str,
    target: str,
    why: str,
    signal: int | None,
    exit_code: int | None,
) -> None:
    """Append `tool_uncertain` (worker_exit, not acknowledged), fsynced."""
    session.append(
        ToolUncertainData(
            call_id=call_id,
            tool=tool,
            cause="worker_exit",
            acknowledged=False,
            note=f"{why}; what the operation did is unknown and it is not re-run",
            target=target,
            signal=signal,
            exit_code=exit_code,
        ),
        durable=True,
    )


def record_finished(
    session: Any, call_id: str, tool: str, arguments: str, target: str, reply: Operated
) -> bool:
    """Write the output and result artifacts, append `tool_finished` and, when the reply
    carries one, `receipt`; True when it did."""
    artifacts = session.artifacts
    shown = reply.text.startswith(reply.summary)  # the text may open with its summary
    text = reply.text if shown else "\n".join(filter(None, [reply.summary, reply.text]))
    full = artifacts.write_text(f"{call_id}.output.txt", text, durable=False)
    result = artifacts.write_json(
        f"{call_id}.result.json", {**reply_fields(reply), "data": reply.data}, durable=False
    )
    session.append(
        ToolFinishedData(
            call_id=call_id,
            tool=tool,
            status=reply.status,
            text=text[:PREVIEW_CHARS],
            arguments=arguments[:PREVIEW_CHARS],
            artifact=result,
            full_output=full,
            target=reply.target or target,
            seconds=round(reply.seconds, 6),
            truncated=len(text) > PREVIEW_CHARS,
            error=reply.error,
        )
    )
    if reply.receipt is None:
        return False
    session.append(ReceiptData(call_id=call_id, **receipt_fields(reply.receipt)))
    return True


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
