"""Other local users get nothing of a session (issue 32, item 2), on every path and front end.

At 623aa1b session dirs were 0755 and `events.jsonl`, `events.index`, `memory.sqlite3` and
`lock` 0644: `nobody` read the prompt and the tool output from the log and the FTS index, and
its `flock` on `lock` (a read-only descriptor suffices) made the owner's next run "in use by
another process". Each run here leaves its sessions dir as the front end wrote it: every
directory under it 0700, every file 0600 (an executable the tool worker made may be 0700),
and nobody (setpriv) can read none of it nor lock the session. The `probe` run is under the
suite's umask (022 here), the `crash` run under umask 0, the widest; the `crash` run's kernel
also writes its files after its worker was killed.
"""

from __future__ import annotations

import pytest

from tests.security.scenarios import RUN_TIMEOUT_S, Run
from tests.support.others import loose_modes, needs_setpriv, nobody_locks, nobody_reads, reachable

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def _owners_alone(run: Run) -> list[str]:
    """Nobody else reads, locks or lists the run's session; what is still open to others."""
    sid = run.outcome.session_id
    assert sid, f"the run named no session: {run.outcome.stderr[-2000:]}"
    home = run.world.home
    directory = home / sid
    assert (directory / "events.jsonl").exists() and (directory / "lock").exists()
    reachable(home.parent)  # only jmp's own modes stand between nobody and the session
    read = [p.name for p in directory.rglob("*") if p.is_file() and nobody_reads(p) is not None]
    assert read == [], f"nobody read {read}"
    assert not nobody_locks(directory / "lock"), "nobody could flock the session's lock"
    return loose_modes(home)


@needs_setpriv
def test_the_sessions_dir_is_the_owners_alone_under_the_usual_umask(probe: Run) -> None:
    assert _owners_alone(probe) == [], "open to other users"


@needs_setpriv
def test_the_sessions_dir_is_the_owners_alone_under_umask_0(crash: Run) -> None:
    assert _owners_alone(crash) == [], "open to other users"
