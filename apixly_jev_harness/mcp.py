"""`python -m apixly_jev_harness.mcp SCRIPT ...` runs `python -m jev_harness.mcp SCRIPT ...`."""

from __future__ import annotations

import importlib.util
import runpy
import sys

if __name__ == "__main__":
    if importlib.util.find_spec("jev_harness.mcp") is None:
        print("apixly_jev_harness.mcp: jev_harness.mcp is not installed", file=sys.stderr)
        sys.exit(2)
    runpy.run_module("jev_harness.mcp", run_name="__main__", alter_sys=True)
