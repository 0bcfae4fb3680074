"""Web sources for jev-harness: providers (HTTP, Camofox, Chromium) and the WebTools toolkit."""

from __future__ import annotations

from jev_harness.web.camofox import CamofoxProvider
from jev_harness.web.chromium import ChromiumProvider
from jev_harness.web.http import HttpProvider
from jev_harness.web.page import Link, Page, Section, WebError
from jev_harness.web.toolkit import WebTools

__all__ = [
    "CamofoxProvider",
    "ChromiumProvider",
    "HttpProvider",
    "Link",
    "Page",
    "Section",
    "WebError",
    "WebTools",
]
