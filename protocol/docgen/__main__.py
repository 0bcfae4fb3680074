"""`python -m protocol.docgen DIR` writes every generated doc into DIR (`make docs`: docs/).

Without DIR it prints docs/EVENTS.md, as it always has.
"""

from __future__ import annotations

import sys
from pathlib import Path

from protocol.docgen import DOCS, generate


def main(argv: list[str]) -> int:
    if not argv:
        sys.stdout.write(generate())
        return 0
    for name, make in DOCS.items():
        (Path(argv[0]) / name).write_text(make())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
