"""One headless Chromium, driven through Playwright in a thread of its own, that dies with us.

Which browser: `JEV_CHROMIUM` (a path or a command name) when set, else the first of
`chromium`, `chromium-browser`, `google-chrome-stable`, `google-chrome` on PATH; a machine with
none gets a WebError `browser_missing` that says how to install one (Debian's package:
`apt-get install -y --no-install-recommends chromium`, `make install-browser`). Playwright is the
Python package from PyPI, in the `browser` extra (`pip install 'jmp-agent[browser]'`; the test
extra brings it too): without it the first fetch is a WebError `browser_missing` naming that
command. Its own browser download (`playwright install`) is never used: the browser is
launched with `executable_path`.

Life cycle: `start()` makes a private directory (crash dumps, caches: nothing is written under
$HOME; Playwright gives the browser a fresh temporary profile) and launches the browser through
a small launcher there that runs it under `setpriv --pdeathsig KILL`, so the browser's main
process is killed by the kernel the moment Playwright's driver (its parent) dies; the driver
itself exits when its pipe from us closes, which a kill -9 of this process does. Both the driver
and the browser start with their soft rlimits raised back to the hard ones: in a harness worker
the soft ones are the task script's (jev_harness/limits.py), under which the driver cannot
start (400 MiB of RLIMIT_DATA) and a renderer crashes now and then (1 GiB). Chromium's own
helpers (zygote, renderers, GPU, network, crash handler) inherit the environment, so the jmp
kernel's tree kill of a dead worker (its token net: kernel/supervision/proctree.py) finds every
one of them too. `close()` closes the browser, stops the driver and removes the directory; a
browser that stopped answering is killed instead (the driver it started and all under it).

All Playwright calls run on one daemon thread (Playwright's sync API is bound to the thread
that started it); `call(fn, timeout_s)` runs `fn(browser)` there and waits at most `timeout_s`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from jev_harness.web.page import WebError

ENV_BINARY = "JEV_CHROMIUM"
ENV_NODE = "PLAYWRIGHT_NODEJS_PATH"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")
PLAYWRIGHT_INSTALL = "pip install 'jmp-agent[browser]'"
PLAYWRIGHT_HINT = (
    f"install jev-harness's browser extra: `{PLAYWRIGHT_INSTALL}` (a tool install: "
    "`uv tool install 'jmp-agent[browser]'`, from a checkout `uv tool install --with playwright "
    "/path/to/jmp`, or `pipx inject jmp-agent playwright`; a checkout's `make install` has it)"
)
INSTALL_HINT = (
    "install Debian's Chromium with `apt-get install -y --no-install-recommends chromium` "
    f"(`make install-browser`) and Playwright with `{PLAYWRIGHT_INSTALL}`, "
    f"or set {ENV_BINARY}=/path/to/chromium"
)
# This machine's network is closed and a run must not phone home: no background requests,
# component updates, sync, first-run work or QUIC.
FLAGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-crash-reporter",
    "--disable-breakpad",
)
LAUNCH_TIMEOUT_S = 60.0
_LAUNCHING = threading.Lock()
T = TypeVar("T")


def find_chromium(env: dict[str, str] | None = None) -> str:
    """The browser binary to use (an absolute path), or WebError `browser_missing`."""
    env = dict(os.environ if env is None else env)
    named = (env.get(ENV_BINARY) or "").strip()
    if named:
        found = shutil.which(named, path=env.get("PATH"))
        if found is None:
            raise WebError(
                "browser_missing", f"{ENV_BINARY}={named!r} is not an executable; {INSTALL_HINT}"
            )
        return os.path.abspath(found)
    for name in CANDIDATES:
        found = shutil.which(name, path=env.get("PATH"))
        if found is not None:
            return os.path.abspath(found)
    raise WebError("browser_missing", f"no Chromium found on PATH; {INSTALL_HINT}")


def playwright_missing() -> str | None:
    """Why Playwright cannot be used here (its import failed), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"the Python package playwright is not installed ({exc}); {PLAYWRIGHT_HINT}"
    return None


def _playwright() -> Any:
    missing = playwright_missing()
    if missing is not None:
        raise WebError("browser_missing", missing)
    from playwright.sync_api import sync_playwright

    return sync_playwright


# The soft limits of memory, address space, file size and processes back at the hard ones: a
# task script's soft limits (jev_harness/limits.py) are not the browser's.
_OWN_LIMITS = 'for o in d f p v; do ulimit -S -$o "$(ulimit -H -$o)" 2>/dev/null; done\n'


def _launcher(
    directory: str, binary: str, name: str = "launch-chromium", death: bool = True
) -> str:
    """A launcher that runs `binary` under the user's limits, not a task script's, and (with
    `death`) with PR_SET_PDEATHSIG=SIGKILL (setpriv, util-linux)."""
    path = os.path.join(directory, name)
    setpriv = shutil.which("setpriv") if death else None
    prefix = f"exec {shlex.quote(setpriv)} --pdeathsig KILL --" if setpriv else "exec"
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'#!/bin/sh\n{_OWN_LIMITS}{prefix} {shlex.quote(binary)} "$@"\n')
    os.chmod(path, 0o700)
    return path


def _driver_launcher(directory: str) -> str:
    """Playwright's driver (its Node.js) through a launcher of `_launcher`'s kind, named by
    PLAYWRIGHT_NODEJS_PATH (Playwright's own setting) while the driver starts."""
    from playwright._impl._driver import compute_driver_executable

    return _launcher(directory, compute_driver_executable()[0], "launch-driver", death=False)


class Browser:
    """One Chromium for one run (see the module docstring): `start()`, `call()`, `close()`."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary
        self.version = ""
        self.launch_s = 0.0
        self.dir: str | None = None
        self._jobs: queue.Queue[tuple[Callable[[Any], Any], queue.Queue[Any]] | None] = (
            queue.Queue()
        )
        self._thread: threading.Thread | None = None
        self._broken = ""
        self._lock = threading.Lock()
        self._driver: list[Any] = []  # the driver process(es) this browser started (psutil)

    def describe(self) -> dict[str, Any]:
        return {"browser": self.binary, "version": self.version}

    def start(self) -> None:
        """Find and launch the browser (once); WebError `browser_missing` / `browser_failed`."""
        with self._lock:
            if self._thread is not None:
                return
            sync_playwright = _playwright()
            self.binary = self.binary or find_chromium()
            self.dir = tempfile.mkdtemp(prefix="jev-chromium-")
            ready: queue.Queue[BaseException | None] = queue.Queue()
            self._thread = threading.Thread(
                target=self._serve, args=(sync_playwright, ready), daemon=True, name="chromium"
            )
            self._thread.start()
        try:
            failed = ready.get(timeout=LAUNCH_TIMEOUT_S)
        except queue.Empty:
            failed = TimeoutError(f"no browser after {LAUNCH_TIMEOUT_S:g} s")
        if failed is not None:
            self._broken = f"{type(failed).__name__}: {str(failed).splitlines()[0][:300]}"
            self.close()
            raise WebError("browser_failed", f"{self.binary} did not start: {self._broken}")

    def _serve(self, sync_playwright: Any, ready: queue.Queue[BaseException | None]) -> None:
        assert self.dir is not None and self.binary is not None
        home = self.dir
        env = {
            **os.environ,
            "BREAKPAD_DUMP_LOCATION": os.path.join(home, "crash"),
            "XDG_CONFIG_HOME": os.path.join(home, "config"),
            "XDG_CACHE_HOME": os.path.join(home, "cache"),
        }
        import psutil

        me = psutil.Process()
        _LAUNCHING.acquire()  # one launch at a time in a process: the new child is its driver
        before = {p.pid for p in me.children()}
        try:
            started = time.monotonic()
            node = os.environ.get(ENV_NODE)
            os.environ[ENV_NODE] = _driver_launcher(home)
            try:
                driver = sync_playwright().start()
            finally:
                if node is None:
                    os.environ.pop(ENV_NODE, None)
                else:
                    os.environ[ENV_NODE] = node
            try:
                browser = driver.chromium.launch(
                    executable_path=_launcher(home, self.binary),
                    headless=True,
                    args=list(FLAGS),  # Playwright gives it a fresh temporary profile
                    chromium_sandbox=False,  # as root Chromium has none; see docs/JEV-HARNESS.md
                    env=env,
                    timeout=LAUNCH_TIMEOUT_S * 1000,
                )
            except BaseException:
                driver.stop()
                raise
            self.version = str(browser.version)
            self.launch_s = time.monotonic() - started
            self._driver = [p for p in me.children() if p.pid not in before]  # ours: to kill
        except BaseException as exc:
            ready.put(exc)
            return
        finally:
            _LAUNCHING.release()
        ready.put(None)
        try:
            while (job := self._jobs.get()) is not None:
                fn, answer = job
                try:
                    answer.put((True, fn(browser)))
                except BaseException as exc:
                    answer.put((False, exc))
        finally:
            with contextlib.suppress(Exception):
                browser.close()
            with contextlib.suppress(Exception):
                driver.stop()

    def call(self, fn: Callable[[Any], T], timeout_s: float) -> T:
        """`fn(browser)` on the browser's thread; WebError `timeout` past `timeout_s`."""
        if self._broken:
            raise WebError("browser_failed", f"the browser is unusable: {self._broken}")
        answer: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._jobs.put((fn, answer))
        try:
            ok, value = answer.get(timeout=timeout_s)
        except queue.Empty:
            self._broken = f"no answer within {timeout_s:g} s"
            raise WebError(
                "timeout", f"the browser gave no answer within {timeout_s:g} s"
            ) from None
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the browser and its driver, remove the private directory; idempotent."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join(timeout=10 if not self._broken else 2)
            if thread.is_alive() or self._broken:
                self._kill()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _kill(self) -> None:
        """SIGKILL every process of this browser: the driver it started and all under it."""
        import psutil

        mine = []
        for driver in self._driver:
            with contextlib.suppress(psutil.Error):
                mine += [driver, *driver.children(recursive=True)]
        for proc in mine:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(mine, timeout=2.0)
