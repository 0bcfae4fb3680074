"""Run the benchmark modules (all of bench/*.py with a run() -> str, or those named) and print."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def available() -> list[str]:
    """Names of the bench modules beside this file."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def main(names: list[str]) -> int:
    chosen = names or available()
    unknown = sorted(set(chosen) - set(available()))
    if unknown:
        print(
            f"unknown bench {', '.join(unknown)}; have: {', '.join(available())}", file=sys.stderr
        )
        return 2
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        if callable(getattr(module, "run", None)):
            print(f"## {name}\n", flush=True)
            print(module.run(), flush=True)
            print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
