"""What a rendered-page source costs: `python -m bench browser` prints the table `run()` returns.

ChromiumProvider on this machine's Chromium (the one `find_chromium` picks), against the
script-made loopback site (jmp_lab/servers/rendered.py): the launch (Playwright's driver and the
browser, what the first fetch of a run pays once), a fetch of the index page (a fresh context,
navigation, the wait for its late section, the snapshot and links), a fetch of the 132,000-
character page, and the memory of the browser's processes after those fetches: RSS summed (it
counts shared pages once per process, so it overstates) and PSS summed (shared pages split
between their users: the honest total), with the process count. Medians of RUNS fresh
providers. Where no browser is installed it says so and measures nothing.
"""

from __future__ import annotations

import statistics
import time

import psutil

from jev_harness.web.browser import find_chromium
from jev_harness.web.chromium import ChromiumProvider
from jev_harness.web.page import WebError
from jmp_lab.servers.rendered import JS_MARKER, RenderedSite

RUNS = 5
MIB = 1024 * 1024


def _memory() -> tuple[int, int, int]:
    """(processes, RSS bytes, PSS bytes) of our descendants: the driver and the browser."""
    count = rss = pss = 0
    for proc in psutil.Process().children(recursive=True):
        try:
            full = proc.memory_full_info()
        except psutil.Error:
            continue
        count, rss, pss = count + 1, rss + full.rss, pss + getattr(full, "pss", full.rss)
    return count, rss, pss


def _one(site: RenderedSite) -> dict[str, float]:
    provider = ChromiumProvider(site.url + "/", [site.url])
    try:
        started = time.perf_counter()
        provider.browser.start()
        launched = time.perf_counter()
        page = provider.fetch(site.url + "/")
        fetched = time.perf_counter()
        assert JS_MARKER in page.text
        provider.fetch(site.url + "/long")
        long_done = time.perf_counter()
        count, rss, pss = _memory()
    finally:
        provider.close()
    return {
        "launch": launched - started,
        "fetch": fetched - launched,
        "long": long_done - fetched,
        "procs": count,
        "rss": rss / MIB,
        "pss": pss / MIB,
    }


def run() -> str:
    try:
        binary = find_chromium()
    except WebError as exc:
        return f"no browser here, nothing measured: {exc.message}"
    with RenderedSite() as site:
        runs = [_one(site) for _ in range(RUNS)]
    med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    low = {key: min(r[key] for r in runs) for key in runs[0]}
    high = {key: max(r[key] for r in runs) for key in runs[0]}
    rows = [
        f"ChromiumProvider on {binary}, {RUNS} fresh providers (median, min-max)",
        f"{'launch s':>16} {'index fetch s':>16} {'long fetch s':>16} {'procs':>6} "
        f"{'RSS MiB':>14} {'PSS MiB':>14}",
        " ".join(
            [
                f"{med['launch']:>5.2f} ({low['launch']:.2f}-{high['launch']:.2f})",
                f"{med['fetch']:>5.2f} ({low['fetch']:.2f}-{high['fetch']:.2f})",
                f"{med['long']:>5.2f} ({low['long']:.2f}-{high['long']:.2f})",
                f"{med['procs']:>6.0f}",
                f"{med['rss']:>5.0f} ({low['rss']:.0f}-{high['rss']:.0f})",
                f"{med['pss']:>5.0f} ({low['pss']:.0f}-{high['pss']:.0f})",
            ]
        ),
        "the index fetch includes the wait for network idle (500 ms of quiet) after its late "
        "section",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(run())
