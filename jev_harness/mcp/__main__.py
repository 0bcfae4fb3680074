"""`python -m jev_harness.mcp ...`."""

from __future__ import annotations

from jev_harness.mcp import entry

if __name__ == "__main__":
    entry()
