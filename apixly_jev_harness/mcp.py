"""`python -m apixly_jev_harness.mcp SCRIPT ...` is `python -m jev_harness.mcp SCRIPT ...`."""

from __future__ import annotations

if __name__ == "__main__":
    from jev_harness.mcp import entry

    entry()
