"""`python -m workers.pool start | stop | status | serve ...`: the commands of `cli`."""

from __future__ import annotations

import sys

from workers.pool.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
