"""The file tools and the special files of a workspace (issue 32 item 3), on every path and
agent front end (the model routes `read`): a FIFO, a character device, a UNIX socket, a block
device (of a loop device number none has: refused by its type before any open, which would
fail ENXIO) and a symbolic link out of the workspace are refused, each naming what it is,
nothing blocks, and the linked file's text reaches no record. The probe run reads each first
(scenarios.py `special_files`)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.security.frontends import SHELL, needs
from tests.security.scenarios import OUTSIDE, RUN_TIMEOUT_S, Run, special_files
from tests.security.world import session_bytes

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def _reads(run: Run) -> dict[str, dict[str, Any]]:
    """Each special file's `tool_finished` of its read, by name."""
    ends = [e["data"] for e in run.events if e["kind"] == "tool_finished"]
    return {d["target"].rsplit("/", 1)[-1]: d for d in ends if d["tool"] == "read"}


@needs(SHELL)
def test_a_fifo_or_a_device_is_refused_by_type_and_the_run_goes_on(probe: Run) -> None:
    kinds = {n: k for n, k in special_files(probe.world).items() if k != "symlink"}
    assert {"pipe", "sock"} <= set(kinds), kinds
    if os.getuid() == 0:  # mknod of a device: root only
        assert {"null", "loop"} <= set(kinds), kinds
    reads = _reads(probe)
    for name, kind in kinds.items():
        found = reads.get(name)
        assert found is not None, f"no end of the read of {name}: {sorted(reads)}"
        assert found["status"] == "error" and f"is a {kind}" in found["error"], found
    final = probe.events[-1]
    assert final["kind"] == "final" and final["data"]["status"] == "completed", final


@needs(SHELL)
def test_a_link_out_of_the_workspace_is_never_read(probe: Run) -> None:
    assert "escape" in special_files(probe.world)
    errors = [e["data"]["message"] for e in probe.events if e["kind"] == "error"]
    assert any("escape" in m and "outside the workspace" in m for m in errors), errors
    home = probe.world.home / (probe.outcome.session_id or "")
    assert OUTSIDE.encode() not in session_bytes(home)
    assert OUTSIDE not in probe.outcome.output
