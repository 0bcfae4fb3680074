"""Alias of `jev_harness`: `import apixly_jev_harness as jev` gives the same objects."""

from __future__ import annotations

from typing import Any

import jev_harness

__all__ = list(jev_harness.__all__)


def __getattr__(name: str) -> Any:
    return getattr(jev_harness, name)


def __dir__() -> list[str]:
    return dir(jev_harness)
