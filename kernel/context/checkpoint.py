"""Deterministic context checkpoints: `context-<seq>.json` in the session directory.

A checkpoint is the folded state at `through` with the finished older calls archived into
factual rows. It holds ints and strings only and is encoded with sorted keys, so the same
log always gives byte-identical files. Later projections fold only the events after it, and
only while the log still holds the record it was folded through (`digest`): after a power
cut the log may hold other records under those seqs, and the checkpoint is then ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import msgspec

from kernel.context.render import archive_calls
from kernel.context.state import MAX_SNAPSHOTS, State, fold
from kernel.errors import JmpError
from kernel.store.durable import write_atomic
from kernel.store.event_log import record_digest
from kernel.store.guard import read_nofollow, storage_error
from protocol.events import Event

CHECKPOINT_FORMAT = 1
NAME = re.compile(r"^context-(\d+)\.json$")


class Checkpoint(msgspec.Struct, kw_only=True):
    """The on-disk checkpoint: format, method, watermark and the state."""

    format: int = CHECKPOINT_FORMAT
    method: str = "deterministic"
    through: int
    digest: str = ""  # record_digest of the log's record at `through` ("": written before it)
    state: State


_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder(Checkpoint)


def build_checkpoint(
    events: Sequence[Event],
    keep_whole: int,
    max_snapshots: int = MAX_SNAPSHOTS,
    start: State | None = None,
) -> tuple[bytes, int]:
    """Fold the log (from `start`, a usable checkpoint's state, when given: only the events
    after it), archive all but the latest `keep_whole` calls; (bytes, through)."""
    state = fold(start.copy() if start is not None else State(), events, max_snapshots)
    archive_calls(state, keep_whole)
    return encode_checkpoint(state, record_digest(events, state.through)), state.through


def encode_checkpoint(state: State, digest: str = "") -> bytes:
    """Sorted-key JSON with a trailing newline."""
    checkpoint = Checkpoint(through=state.through, digest=digest, state=state)
    return _encoder.encode(checkpoint) + b"\n"


def decode_checkpoint(data: bytes) -> Checkpoint:
    """Parse checkpoint bytes; raises ValueError when they are not a checkpoint of this format."""
    try:
        checkpoint = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a context checkpoint: {exc}") from exc
    if checkpoint.format != CHECKPOINT_FORMAT:
        raise ValueError(f"context checkpoint format {checkpoint.format} is not supported")
    return checkpoint


def write_checkpoint(session_dir: str | os.PathLike[str], data: bytes, through: int) -> str:
    """Write `context-<through>.json` atomically (temp file, fsync, rename); returns its name."""
    directory = Path(session_dir)
    name = f"context-{through}.json"
    try:
        write_atomic(directory, name, data)  # replaces a planted link, never follows it
    except OSError as exc:
        raise storage_error("write the checkpoint", directory / name, exc) from None
    return name


def load_latest_checkpoint(session_dir: str | os.PathLike[str]) -> Checkpoint | None:
    """The newest readable checkpoint, or None; unreadable files are skipped, never raised."""
    directory = Path(session_dir)
    try:
        names = [(int(m.group(1)), p) for p in directory.iterdir() if (m := NAME.match(p.name))]
    except OSError:
        return None
    for _, path in sorted(names, reverse=True):
        try:
            return decode_checkpoint(read_nofollow(path))
        except (OSError, ValueError, JmpError):
            continue
    return None


def usable(checkpoint: Checkpoint, events: Sequence[Event]) -> bool:
    """A checkpoint applies to this log: same session, not beyond its last record, and (when
    it says) folded through the very record the log holds at `through`."""
    if not events:
        return False
    last = events[-1].seq or 0
    state = checkpoint.state
    if state.session_id != events[0].session_id or checkpoint.through > last:
        return False
    return not checkpoint.digest or checkpoint.digest == record_digest(events, checkpoint.through)
