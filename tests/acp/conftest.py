"""Every ACP test's frames, both ways, are checked against the official ACP schema when it ends
(issue 24, "Prove it with the clients"): a frame that does not validate, or that carries a
field the schema does not name, fails the test (tests/acp/schema_check.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.acp.helpers import FRAME_LOGS


@pytest.fixture(autouse=True)
def frames_follow_the_schema() -> Iterator[None]:
    FRAME_LOGS.clear()
    yield
    logs = list(FRAME_LOGS)
    FRAME_LOGS.clear()
    found = [problem for log in logs for problem in log.problems()]
    assert not found, "frames that break the ACP schema:\n" + "\n".join(found[:20])
