"""Rows known to fail on some cells until a fix lands: each is xfail(strict=True) there.

Strict: the moment the fix makes the row pass, the suite fails (XPASS) until the entry here is
removed, so no fixed promise stays unproven and no pending one is forgotten. An entry names the
row (the test function), the cells (paths x front ends; all when left out) and the reason: the
issue item and who is fixing it. test_coverage.py checks that every entry names a real row.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.security.frontends import FRONT_ENDS
from tests.security.paths import PATHS

ALL_PATHS = frozenset(PATHS)
ALL_FRONT_ENDS = frozenset(FRONT_ENDS)
AGENT = frozenset(n for n, fe in FRONT_ENDS.items() if fe.family == "agent")
HARNESS = frozenset(n for n, fe in FRONT_ENDS.items() if fe.family == "harness")


@dataclass(frozen=True)
class Pending:
    row: str
    reason: str
    paths: frozenset[str] = ALL_PATHS
    front_ends: frozenset[str] = ALL_FRONT_ENDS

    def covers(self, row: str, path: str, front_end: str) -> bool:
        return row == self.row and path in self.paths and front_end in self.front_ends


WARM = frozenset({"warm"})
COLD = frozenset({"cold"})

PENDING: list[Pending] = []


def pending_for(row: str, path: str, front_end: str) -> Pending | None:
    for entry in PENDING:
        if entry.covers(row, path, front_end):
            return entry
    return None
