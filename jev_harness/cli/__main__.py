"""`python -m jev_harness.cli ...` is the `jev-harness` console script."""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # check-task writes no file at all, bytecode caches included

from jev_harness.cli.main import entry  # noqa: E402

if __name__ == "__main__":
    entry()
