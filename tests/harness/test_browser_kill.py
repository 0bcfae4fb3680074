"""A kill -9 of the harness worker during a rendered fetch, on both spawn paths (a private warm
pool, and JMP_WARM=0): no browser process survives it, the fetch surfaces as `tool_uncertain`
(cause worker_exit, the run blocked, nothing re-fetched), and the page captured before it is
intact in the log."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jmp_lab.servers.jev import JevServer
from jmp_lab.servers.rendered import JS_MARKER, LATE_MARKER, RenderedSite
from tests.harness.helpers import ROOT, HarnessCli
from tests.support.browser import browser_of, browser_processes, needs_chromium
from tests.support.cli import Run
from tests.support.warm import workers_of

RESEARCH = ROOT / "examples" / "research_task.py"
MARK_ENV = "JEV_TEST_BROWSER_RUN"  # inherited by the browser: how its processes are found
# (jmp_lab/chaos/rendered.py runs the same kill with the entry page held, and as a runner)


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


@needs_chromium
@pytest.mark.parametrize("warm", ["warm", "cold"])
def test_a_worker_killed_mid_render_leaves_no_browser_and_an_uncertain_fetch(
    cli: HarnessCli, warm: str
) -> None:
    mark = uuid.uuid4().hex
    cli.extra_env[MARK_ENV] = mark
    if warm == "cold":
        cli.extra_env["JMP_WARM"] = "0"
    cli.jev.script([{"tool": "web.open_link"}, {"web.open_link.link": "slow"}])
    with RenderedSite(slow_s=120) as site:
        inputs = {
            "url": site.url + "/",
            "allowed_origins": [site.url],
            "markers": {"answer": "never-there"},
            "output": "report.json",
            "provider": "chromium",
        }
        argv = cli.run_argv(RESEARCH, "read the slow page", inputs)
        proc = subprocess.Popen(
            argv,
            cwd=cli.cwd,
            env=cli.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            if not site.wait_for("/slow", timeout=120, alive=lambda: proc.poll() is None):
                proc.kill()
                stdout, stderr = proc.communicate()
                pytest.fail(f"the browser never asked for /slow: {stderr[-3000:]}{stdout[-3000:]}")
            workers = workers_of(proc.pid, "harness")
            assert len(workers) == 1
            browser = browser_of(workers[0])
            assert any("chromium" in " ".join(p.cmdline()) for p in browser), browser
            assert browser_processes(mark)  # the driver and Chromium's main process hold it
            workers[0].send_signal(signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        out = Run.parsed(proc.returncode, stdout, stderr)
        # no browser process survives: those seen under the worker, and any that holds the mark
        # (Chromium's crash handler leaves its parent at start; it holds the mark too)
        assert psutil.wait_procs(browser, timeout=60)[1] == []
        leftover = browser_processes(mark)
        assert psutil.wait_procs(leftover, timeout=60)[1] == [], leftover
        assert out.code == 2 and out.result["status"] == "blocked", out.stderr[-2000:]
        uncertain = out.of("tool_uncertain")
        assert len(uncertain) == 1 and uncertain[0]["tool"] == "web.open_link"
        assert uncertain[0]["cause"] == "worker_exit"
        session = out.result["session_id"]
        # the page captured before the kill is intact in the log, as it was logged
        finished = [e["data"] for e in cli.events(session) if e["kind"] == "tool_finished"]
        assert len(finished) == 1 and finished[0]["tool"] == "web.open_link"
        assert JS_MARKER in json.dumps(finished[0]) and LATE_MARKER in json.dumps(finished[0])
        assert cli.inspect(session).code == 0
        site.release_slow()
        assert site.count("/slow") == 1  # never re-fetched, neither by the run nor by inspect
