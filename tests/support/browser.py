"""Whether a real browser is here: the rendered-page tests skip, saying why, where it is not."""

from __future__ import annotations

import importlib.util

import pytest

from jev_harness.web.browser import INSTALL_HINT, find_chromium
from jev_harness.web.page import WebError
from jmp_lab.chaos.rendered import browser_of, browser_processes


def missing_browser() -> str | None:
    """Why the rendered-page tests cannot run here, or None."""
    if importlib.util.find_spec("playwright") is None:
        return f"the Python package playwright is not installed ({INSTALL_HINT})"
    try:
        find_chromium()
    except WebError as exc:
        return exc.message
    return None


_WHY = missing_browser()
needs_chromium = pytest.mark.skipif(_WHY is not None, reason=f"no browser: {_WHY}")
__all__ = ["browser_of", "browser_processes", "missing_browser", "needs_chromium"]
