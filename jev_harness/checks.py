"""Helpers for scripts: record checks and verifiers built from markers.

`markers` is, as docs/HARNESS.md section 2 writes it, a mapping from each requested category
(the record label) to the marker its quotes must contain: `{"requirements": "REQ-7"}`. A list of
markers is accepted too; each marker is then its own label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

MARKERS_FORM = (
    'map each category label to its marker, e.g. {"requirements": "<source marker>"} '
    "(a list of markers is accepted too)"
)


def contains(marker: str) -> Callable[[str], bool]:
    """A strict record check: True when the passage contains `marker` verbatim."""
    if not isinstance(marker, str) or not marker:
        raise ValueError("contains(marker): the marker must be a non-empty string")

    def check(passage: str) -> bool:
        return isinstance(passage, str) and marker in passage

    check.__name__ = f"contains({marker!r})"
    return check


def markers_by_label(markers: Any, name: str = "markers") -> dict[str, str]:
    """`markers` as {label: marker}: a mapping as given, a list (or one string) labelled by
    the markers themselves. ValueError naming `name` for anything else, or an empty one."""
    if isinstance(markers, str):
        markers = [markers]
    if isinstance(markers, Mapping):
        pairs = list(markers.items())
    elif isinstance(markers, list | tuple):
        pairs = [(m, m) for m in markers]
    else:
        raise ValueError(f"{name} must {MARKERS_FORM}; got {type(markers).__name__}")
    if not pairs:
        raise ValueError(f"{name} is empty: {MARKERS_FORM}")
    for label, marker in pairs:
        if not (isinstance(marker, str) and marker.strip()):
            raise ValueError(
                f"{name}[{label!r}]: the marker must be a non-empty string, not {marker!r}"
            )
        if not (isinstance(label, str) and label.strip()):
            raise ValueError(f"{name}: a category label must be a non-empty string, not {label!r}")
    return dict(pairs)


def markers_verifier(
    markers: Mapping[str, str] | Iterable[str],
) -> Callable[[Sequence[Mapping[str, Any]]], bool]:
    """A verifier. Given {label: marker}: True when every category has a record of that label
    whose full quote contains its marker. Given markers alone: True when every marker occurs
    in the full quote of at least one record."""
    if isinstance(markers, Mapping):
        wanted = markers_by_label(markers, "markers_verifier(markers)")

        def verify_categories(records: Sequence[Mapping[str, Any]]) -> bool:
            def holds(label: str, marker: str) -> bool:
                return any((q := _quote(r, label)) is not None and marker in q for r in records)

            return all(holds(label, marker) for label, marker in wanted.items())

        return verify_categories
    plain = list(markers)
    if not plain or not all(isinstance(m, str) and m for m in plain):
        raise ValueError("markers_verifier(markers): give at least one non-empty string")

    def verify(records: Sequence[Mapping[str, Any]]) -> bool:
        quotes = [r.get("quote", "") for r in records if isinstance(r, Mapping)]
        return all(any(isinstance(q, str) and m in q for q in quotes) for m in plain)

    return verify


def _quote(record: Any, label: str) -> str | None:
    """The record's quote when it is a record of `label`, else None."""
    if not isinstance(record, Mapping) or record.get("label") != label:
        return None
    quote = record.get("quote")
    return quote if isinstance(quote, str) else None
