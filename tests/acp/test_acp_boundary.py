"""The ACP front end stays a front end: the kernel never imports the SDK, the CLI only on --acp."""

from __future__ import annotations

import subprocess
import sys

from tests.support.cli import ROOT

SCRIPT = """
import importlib, pkgutil, sys
import kernel, cli.main
for info in pkgutil.walk_packages(kernel.__path__, "kernel."):
    importlib.import_module(info.name)
before = sorted(m for m in sys.modules if m == "acp" or m.startswith(("acp.", "acp_server")))
import acp_server.server
after = [m for m in ("openhands", "openai", "typesafe_sdk", "mcp") if m in sys.modules]
print(before, after)
"""


def test_kernel_and_cli_import_no_acp_and_the_front_end_no_vendor_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] []"
