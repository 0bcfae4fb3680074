"""A hostile launch directory (issue 20 item 2): the directory a front end starts from holds a
module for every top-level name an import could look up (`zmq.py`, `msgspec.py`, `queue.py`,
`argparse.py`, `workers/`, `protocol/`, `kernel/`, the whole stdlib, every installed
distribution: tests/support/launch_dir.py), each writing a witness line when imported (then
handing over to the real module, so that the run goes on). The probe run starts every front
end there (it is also the agent's workspace): no process of jmp's may import them. What the
matrix does not drive (the other MCP spellings, check-task, `python -m workers.pool start`,
the dev tools, what `python -m` itself does) is in tests/test_launch_dir.py.
"""

from __future__ import annotations

import pytest

from tests.security.scenarios import RUN_TIMEOUT_S, Run

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def test_no_file_of_the_launch_directory_is_imported(probe: Run) -> None:
    assert not probe.world.witnesses(), "\n".join(probe.world.witnesses())
