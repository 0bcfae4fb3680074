"""Whether a real browser is here: the rendered-page tests skip, saying why, where it is not."""

from __future__ import annotations

import importlib.util

import psutil
import pytest

from jev_harness.web.browser import INSTALL_HINT, find_chromium
from jev_harness.web.page import WebError


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


def browser_processes(marker: str) -> list[psutil.Process]:
    """Running processes (zombies aside) whose environment holds `marker` as a value and whose
    executable is a browser or Playwright's driver: what a run's browser left behind."""
    found = []
    for proc in psutil.process_iter(["name", "exe", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            exe = (proc.info["exe"] or proc.info["name"] or "").lower()
            if not any(n in exe for n in ("chrom", "node", "playwright", "crashpad")):
                continue
            if marker in proc.environ().values():
                found.append(proc)
        except psutil.Error:
            continue
    return found
