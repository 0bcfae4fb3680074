"""`jmp --compact`: a checkpoint of the session's log and one `compaction` event per audience.

Its own module because it needs both the policy and the checkpoint writer, and the policy
imports the checkpoint module (no import cycle).
"""

from __future__ import annotations

from kernel.context.checkpoint import load_latest_checkpoint, write_checkpoint
from kernel.context.policy import AUDIENCES, ContextPolicy
from protocol.events import CompactionData


def compact(session: object, policy: object | None = None) -> list[CompactionData]:
    """Write the checkpoint of the session's log and append one `compaction` event per audience."""
    chosen = policy if isinstance(policy, ContextPolicy) else ContextPolicy()
    # Folded only from durable records: a checkpoint must never outlive what it was made of.
    session.sync()  # type: ignore[attr-defined]
    events = session.events  # type: ignore[attr-defined]
    previous = load_latest_checkpoint(session.directory)  # type: ignore[attr-defined]
    data, info = chosen.checkpoint(events, AUDIENCES[0], previous)  # folds what came since
    name = write_checkpoint(session.directory, data, info.through)  # type: ignore[attr-defined]
    written = []
    for audience in AUDIENCES:
        record = CompactionData(
            audience=audience, through=info.through, checkpoint=name, method="deterministic"
        )
        session.append(record, durable=True)  # type: ignore[attr-defined]
        written.append(record)
    return written
