"""Helpers for scripts: record checks and verifiers built from markers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def contains(marker: str) -> Callable[[str], bool]:
    """A strict record check: True when the passage contains `marker` verbatim."""
    if not isinstance(marker, str) or not marker:
        raise ValueError("contains(marker): the marker must be a non-empty string")

    def check(passage: str) -> bool:
        return isinstance(passage, str) and marker in passage

    check.__name__ = f"contains({marker!r})"
    return check


def markers_verifier(markers: Iterable[str]) -> Callable[[Sequence[Mapping[str, Any]]], bool]:
    """A verifier: True when every marker occurs in the full quote of at least one record."""
    wanted = list(markers)
    if not wanted or not all(isinstance(m, str) and m for m in wanted):
        raise ValueError("markers_verifier(markers): give at least one non-empty string")

    def verify(records: Sequence[Mapping[str, Any]]) -> bool:
        quotes = [r.get("quote", "") for r in records if isinstance(r, Mapping)]
        return all(any(isinstance(q, str) and m in q for q in quotes) for m in wanted)

    return verify
