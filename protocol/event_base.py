"""The base of every event's `data` struct (protocol/events.py, protocol/harness_events.py)."""

from __future__ import annotations

import msgspec


class Data(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Base of every event's `data`. Unknown fields are ignored on read."""
