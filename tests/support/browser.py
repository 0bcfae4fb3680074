"""Whether a real browser is here: the rendered-page tests skip, saying why, where it is not;
with JMP_REQUIRE_BROWSER=1 (CI: .ci/run) they fail instead, naming the missing part, so a
suite that renders nothing cannot pass as one that rendered."""

from __future__ import annotations

import functools
import os

import pytest

from jev_harness.web.browser import find_chromium, playwright_missing
from jev_harness.web.page import WebError
from jmp_lab.chaos.rendered import browser_of, browser_processes

REQUIRE_ENV = "JMP_REQUIRE_BROWSER"


@functools.cache
def missing_browser() -> str | None:
    """Why the rendered-page tests cannot run here, or None."""
    missing = playwright_missing()
    if missing is not None:
        return missing
    try:
        find_chromium()
    except WebError as exc:
        return exc.message
    return None


def browser_required() -> bool:
    """JMP_REQUIRE_BROWSER is set (to anything but empty or 0)."""
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0")


def skip_without_browser(why: str | None = None) -> None:
    """Skip the test, saying why no browser is here; with JMP_REQUIRE_BROWSER=1, fail it."""
    why = why or missing_browser() or "no browser was started"
    if browser_required():
        pytest.fail(f"{REQUIRE_ENV}=1 but no browser: {why}", pytrace=False)
    pytest.skip(f"no browser: {why}")


# The mark of the tests that need the browser; tests/conftest.py (pytest_runtest_setup) skips
# or fails them through `skip_without_browser` where `missing_browser()` says why.
needs_chromium = pytest.mark.browser
__all__ = [
    "REQUIRE_ENV",
    "browser_of",
    "browser_processes",
    "browser_required",
    "missing_browser",
    "needs_chromium",
    "skip_without_browser",
]
