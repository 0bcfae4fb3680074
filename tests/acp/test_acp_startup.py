"""`initialize` is answered before the ACP SDK is loaded (issue 24 item 7). No timing: the SDK's
import is held at a gate (a `sitecustomize` on PYTHONPATH) until the answer has arrived; before,
the answer waited for the import. How much sooner: `python -m bench acp` (a ratio)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.acp.helpers import frame_log
from tests.support.cli import ROOT, Cli

pytestmark = pytest.mark.timeout(300)

GATE = """
import importlib.abc, os, sys, time

class _Gate(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "acp":
            gate = os.environ["ACP_IMPORT_GATE"]
            for _ in range(1200):  # 60 s at most: then the import goes on (the old code)
                if os.path.exists(gate):
                    break
                time.sleep(0.05)
            open(gate + ".passed", "w").close()
        return None

sys.meta_path.insert(0, _Gate())
"""


def test_initialize_is_answered_while_the_sdk_is_still_loading(jmp: Cli) -> None:
    site = jmp.tmp / "gate-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(GATE))
    gate = jmp.tmp / "gate"
    env = jmp.env(PYTHONPATH=str(site), ACP_IMPORT_GATE=str(gate))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "--acp"],
        cwd=jmp.workspace,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    log = frame_log("startup")
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        listing = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
        for message in (hello, listing):
            log.add("client", message)
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())  # before: blocked until the gate opened
        log.add("agent", first)
        assert first["id"] == 1 and first["result"]["agentInfo"]["name"] == "jmp"
        assert not Path(f"{gate}.passed").exists()  # the SDK's import is still held
        gate.touch()
        second = json.loads(proc.stdout.readline())  # answered by the SDK once loaded
        log.add("agent", second)
        assert second == {"jsonrpc": "2.0", "id": 2, "result": {"sessions": []}}
        assert Path(f"{gate}.passed").exists()  # the gate held the import: the test proves it
    finally:
        gate.touch()
        proc.stdin.close()
        proc.stdout.read()
        proc.stdout.close()
        assert proc.wait(timeout=120) == 0
