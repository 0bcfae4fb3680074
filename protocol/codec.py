"""Encoders and decoders for log records and wire frames, with the version check."""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from protocol.events import DATA_TYPES, EVENT_VERSION, KIND_OF, Data, Event
from protocol.harness import HarnessFromWorker, HarnessToWorker
from protocol.messages import WIRE_VERSION, Frame, FromWorker, ToWorker
from protocol.text import cleaned


class UnsupportedVersion(ValueError):
    """A record or frame carries a version this build does not speak."""


class MalformedRecord(ValueError):
    """A complete line that is not a valid event record."""


class _RawEvent(msgspec.Struct):
    version: int
    session_id: str
    seq: int | None
    kind: str
    data: msgspec.Raw
    time: float | None = None


class _Peek(msgspec.Struct):
    v: int


_json_encoder = msgspec.json.Encoder()
_raw_event_decoder = msgspec.json.Decoder(_RawEvent)
# Built on first use, per kind: a process reads only some kinds, and each decoder costs its
# start time (issue 11: the kernel's start counts against a bare interpreter's).
_data_decoders: dict[str, msgspec.json.Decoder[Any]] = {}


def _data_decoder(kind: str) -> msgspec.json.Decoder[Any] | None:
    decoder = _data_decoders.get(kind)
    if decoder is None and kind in DATA_TYPES:
        decoder = _data_decoders[kind] = msgspec.json.Decoder(DATA_TYPES[kind])
    return decoder


def make_event(session_id: str, seq: int | None, time: float | None, data: Data) -> Event:
    """Wrap a typed data struct into an envelope; the kind comes from the struct's type."""
    return Event(session_id=session_id, seq=seq, time=time, kind=KIND_OF[type(data)], data=data)


def encode_event(event: Event) -> bytes:
    """One JSON line (no trailing newline); a string UTF-8 cannot carry is escaped, never fatal."""
    try:
        return _json_encoder.encode(event)
    except UnicodeEncodeError:
        return _json_encoder.encode(cleaned(msgspec.to_builtins(event)))


def decode_event(line: bytes | str) -> Event:
    """Parse one log line. Unknown kinds keep `data` as a dict; another version is refused."""
    try:
        raw = _raw_event_decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise MalformedRecord(str(exc)) from exc
    if raw.version != EVENT_VERSION:
        raise UnsupportedVersion(
            f"event record version {raw.version} is not supported (this build reads "
            f"version {EVENT_VERSION})"
        )
    decoder = _data_decoder(raw.kind)
    try:
        data: Any = decoder.decode(raw.data) if decoder else msgspec.json.decode(raw.data)
    except msgspec.DecodeError as exc:
        raise MalformedRecord(f"{raw.kind}: {exc}") from exc
    return Event(
        version=raw.version,
        session_id=raw.session_id,
        seq=raw.seq,
        time=raw.time,
        kind=raw.kind,
        data=data,
    )


def to_builtins(obj: Any) -> Any:
    """Structs to plain dicts/lists (for JSON printing and context building)."""
    return msgspec.to_builtins(obj)


# --- wire frames -----------------------------------------------------------------


# One union per direction: every worker kind speaks through the same frames. Each side builds
# only the decoder it reads with, on first use.
@functools.cache
def _to_worker_decoder() -> msgspec.msgpack.Decoder[Frame[ToWorker | HarnessToWorker]]:
    return msgspec.msgpack.Decoder(Frame[ToWorker | HarnessToWorker])


@functools.cache
def _from_worker_decoder() -> msgspec.msgpack.Decoder[Frame[FromWorker | HarnessFromWorker]]:
    return msgspec.msgpack.Decoder(Frame[FromWorker | HarnessFromWorker])


def preload() -> None:
    """Build both frame decoders now: the warm pool does, so that its forks do not."""
    _to_worker_decoder()
    _from_worker_decoder()


_peek_decoder = msgspec.msgpack.Decoder(_Peek)
_msgpack_encoder = msgspec.msgpack.Encoder()


def encode_frame(body: Any) -> bytes:
    """Encode one message inside a versioned frame. A string UTF-8 cannot carry (a lone
    surrogate: an undecodable file name, a model's `\\ud800`) is escaped, never fatal."""
    frame = Frame(body=body)
    try:
        return _msgpack_encoder.encode(frame)
    except UnicodeEncodeError:
        return _msgpack_encoder.encode(cleaned(msgspec.to_builtins(frame)))


def _check_version(buf: bytes) -> None:
    try:
        peek = _peek_decoder.decode(buf)
    except msgspec.DecodeError as exc:
        raise msgspec.DecodeError(f"not a frame: {exc}") from exc
    if peek.v != WIRE_VERSION:
        raise UnsupportedVersion(
            f"wire protocol version {peek.v} is not supported (this build speaks {WIRE_VERSION})"
        )


def decode_to_worker(buf: bytes) -> ToWorker | HarnessToWorker:
    """Decode a kernel->worker frame. Raises DecodeError or UnsupportedVersion."""
    _check_version(buf)
    return _to_worker_decoder().decode(buf).body


def decode_from_worker(buf: bytes) -> FromWorker | HarnessFromWorker:
    """Decode a worker->kernel frame. Raises DecodeError or UnsupportedVersion."""
    _check_version(buf)
    return _from_worker_decoder().decode(buf).body
