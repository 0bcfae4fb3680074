"""A confinement the pool cannot read from /proc binds the warm worker as the cold one (issue
32 item 1), on both spawn paths and every front end: a Landlocked run's untrusted code (the
model's shell, the task script) cannot write outside the rules. Before: on the warm path the
suite's unconfined pool forked the worker (the view matched), and the write went through.

The run (`scenarios.unseen`): writes allowed only under /tmp, /dev and /proc; the untrusted
code tries `/var/tmp/jmp-unseen-MARKER`. Securebits and the root directory: tests/workers/
test_warm_pool_unseen.py (both paths).
"""

from __future__ import annotations

import json

import pytest

from tests.security.scenarios import Run
from tests.support import landlock

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(bool(landlock.available()), reason=landlock.available()),
]


def _error(unseen: Run) -> str:
    """What the untrusted code's write outside the rules got ('' when it succeeded)."""
    out = unseen.world.out
    if unseen.cell.fe.family == "agent":
        assert (out / "unseen.rc").exists(), f"the shell did not run: {unseen.outcome}"
        code = (out / "unseen.rc").read_text().strip()
        return "" if code == "0" else (out / "unseen.err").read_text()
    assert (out / "unseen.json").exists(), f"the task script did not run: {unseen.outcome}"
    return str(json.loads((out / "unseen.json").read_text())["error"])


def test_a_landlocked_runs_untrusted_code_cannot_write_outside_its_rules(unseen: Run) -> None:
    error = _error(unseen)
    assert not unseen.notes["escaped"], "the untrusted code wrote outside the Landlock rules"
    assert "Permission denied" in error, error
    if unseen.cell.path == "warm":  # cold, and says why: the pool is in no domain of ours
        assert "Landlock domain" in unseen.outcome.stderr, unseen.outcome.stderr[-2000:]
