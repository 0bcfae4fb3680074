"""`python -m jmp_lab.chaos.powercut serve BACKING MOUNT ...` runs a disk (daemon.py);
`python -m jmp_lab.chaos.powercut check` says whether power cuts can run here (exit 2 if not)."""

from __future__ import annotations

import sys

from jmp_lab.chaos.powercut.control import available


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        from jmp_lab.chaos.powercut.daemon import main as serve

        return serve(argv[1:])
    if argv[:1] == ["check"]:
        reason = available()
        print(f"power cuts cannot run here: {reason}" if reason else "power cuts can run here")
        return 2 if reason else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
