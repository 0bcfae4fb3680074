"""Installed as a tool, the way users install (issue 23): `uv tool install <checkout>` and
`pipx install <checkout>` into a fresh home directory; a session made there survives an
uninstall and a reinstall (it lives under ~/.local/share/jmp, never inside the package).

Offline: uv, pipx and every dependency come from a local wheelhouse (`make wheelhouse`, the one
step that needs PyPI); `make test-install` runs this. It takes minutes, so `make test` skips it
unless JMP_WHEELHOUSE names that directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import ROOT

WHEELHOUSE = os.environ.get("JMP_WHEELHOUSE", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(
        not WHEELHOUSE, reason="installs jmp with uv and pipx from a wheelhouse: make test-install"
    ),
]
KEPT = ("__pycache__", ".venv", ".git", ".jmp", "*.egg-info", "build", ".*_cache")


class Home:
    """A user with nothing installed: a fresh HOME, uv and pipx in a venv of their own, every
    command offline (no index, the wheelhouse only)."""

    def __init__(self, tmp: Path, jev: JevServer, flash: FlashServer) -> None:
        self.home = tmp / "home"
        self.bin = self.home / ".local" / "bin"
        self.home.mkdir()
        self.python = sys._base_executable  # a plain Python >= 3.12, not the suite's venv
        tools = tmp / "tools"
        subprocess.run([self.python, "-m", "venv", str(tools)], check=True)
        pip = [str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index"]
        subprocess.run([*pip, "--find-links", WHEELHOUSE, "uv", "pipx"], check=True)
        self.env = {
            "HOME": str(self.home),
            "PATH": f"{self.bin}:{tools / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TMPDIR": str(tmp),
            "UV_OFFLINE": "1",
            "UV_NO_INDEX": "1",
            "UV_FIND_LINKS": WHEELHOUSE,
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_CACHE_DIR": str(tmp / "uv-cache"),
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": WHEELHOUSE,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIPX_DEFAULT_PYTHON": self.python,
            "TYPESAFE_API_KEY": "tsk-install-test-0123456789",
            "TYPESAFE_BASE_URL": jev.url,
            "FLASH_API_KEY": "sk-install-test-0123456789",
            "FLASH_BASE_URL": flash.url,
            "JMP_WARM": "0",  # this test is about files, not the pool (test_warm_pool.py)
        }
        self.workspace = tmp / "project"
        self.workspace.mkdir()

    def __call__(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv, cwd=self.workspace, env=self.env, capture_output=True, text=True, timeout=900
        )
        if check:
            assert done.returncode == 0, f"{argv}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done

    @property
    def sessions(self) -> Path:
        return self.home / ".local" / "share" / "jmp" / "sessions"


def _checkout(tmp: Path) -> Path:
    """The checkout as a user has it (its files, without our .venv, caches or sessions)."""
    copy = tmp / "jmp-checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*KEPT))
    return copy


def _first_session(user: Home, jev: JevServer, flash: FlashServer) -> str:
    jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    flash.queue([{"tool_call": {"arguments": {"command": "echo hi"}}}, {"text": "Said hi."}])
    run = user("jmp", "--no-mcp", "say hi")
    assert f"kept in {user.sessions}" in run.stdout, run.stdout
    return re.search(r"\[completed\] session ([0-9a-f]{32})", run.stdout)[1]


def _listed(user: Home, session: str) -> None:
    listing = user("jmp", "--list")
    assert session in listing.stdout and f"sessions are kept in {user.sessions}" in listing.stdout
    assert "Said hi." in user("jmp", "--session", session).stdout  # the replay needs no model


def test_sessions_outlive_uninstall_and_reinstall_with_uv_and_pipx(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    with JevServer() as jev, FlashServer() as flash:
        user = Home(tmp_path, jev, flash)
        user("uv", "tool", "install", "--compile-bytecode", "--python", user.python, str(checkout))
        version = user("jmp", "--version").stdout
        assert version.startswith("jmp ") and "(installed, " in version, version
        site = Path(version.rsplit(", ", 1)[1].rstrip(")\n"))
        assert site.name == "site-packages" and not (site / "tests").exists()
        assert user("jev-harness", "--version").stdout.startswith("jev-harness ")
        assert "jmp-demo" in user("jmp-demo", "--help").stdout
        assert "jmp_lab.chaos" in user("jmp-chaos", "--help").stdout
        session = _first_session(user, jev, flash)
        assert (user.sessions / session / "events.jsonl").is_file()
        assert not (site / ".jmp").exists()  # nothing a user made is inside the package
        user("uv", "tool", "uninstall", "jmp-agent")
        assert not (user.bin / "jmp").exists() and not site.exists()
        assert (user.sessions / session / "events.jsonl").is_file()
        user("uv", "tool", "install", "--compile-bytecode", "--python", user.python, str(checkout))
        _listed(user, session)
        user("uv", "tool", "uninstall", "jmp-agent")
        user("pipx", "install", str(checkout))
        _listed(user, session)
        user("pipx", "uninstall", "jmp-agent")
        assert not (user.bin / "jmp").exists()
        user("pipx", "install", str(checkout))
        _listed(user, session)
