"""Installed as a tool, the way users install (issue 23): `uv tool install <checkout>` and
`pipx install <checkout>` into a fresh home directory; a session made there survives an
uninstall and a reinstall (it lives under ~/.local/share/jmp, never inside the package);
installing writes nothing into the checkout; and the README's keyless first run, its lines as
written, completes a task the user typed on the installed tool (issue 37).

Offline: uv, pipx and every dependency come from a local wheelhouse (`make wheelhouse`, the one
step that needs PyPI); `make test-install` runs this. It takes minutes, so `make test` skips it
unless JMP_WHEELHOUSE names that directory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from kernel.store.catalog import list_sessions
from tests.support.install import checkout_copy, tree
from tests.test_readme_commands import first_run

WHEELHOUSE = os.environ.get("JMP_WHEELHOUSE", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(
        not WHEELHOUSE, reason="installs jmp with uv and pipx from a wheelhouse: make test-install"
    ),
]


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


def _a_newcomers_first_hour(user: Home, site: Path, checkout: Path) -> None:
    """Issue 37, on the installed tool: the package's license, no build/ left in the checkout,
    the usage lines name the commands, the examples ship (the seed's check-task line works
    after `jev-harness examples --copy examples`), and the README's first run."""
    [meta] = site.glob("jmp_agent-*.dist-info")
    assert "License-Expression: MIT" in (meta / "METADATA").read_text()
    assert (meta / "licenses" / "LICENSE").is_file()
    assert not (checkout / "build").exists()
    assert user("jmp-demo", "--help").stdout.startswith("usage: jmp-demo ")
    assert user("jmp-chaos", "--help").stdout.startswith("usage: jmp-chaos ")
    assert "usage: jev-harness-mcp " in user("jev-harness-mcp", "--help").stderr
    missing = user("jev-harness", "check-task", "examples/research_task.py", check=False)
    assert missing.returncode == 2 and "jev-harness examples --copy examples" in missing.stderr
    user("jev-harness", "examples", "--copy", "examples")
    sound = user("jev-harness", "check-task", "examples/research_task.py")
    assert "check-task: sound" in sound.stdout
    _the_readmes_first_run(user)


def _the_readmes_first_run(user: Home) -> None:
    """README "A first run", its lines as written (tests/test_readme_commands.py first_run()):
    `jmp-demo --serve` of the installed tool on its fixed ports, the export line it prints (the
    README's, to the byte), then in a second shell of the fresh home that line, `mkdir -p
    ~/jmp-try && cd ~/jmp-try` and the typed task, which completes there."""
    serve, export, typed = first_run()
    env = {k: v for k, v in user.env.items() if not k.startswith(("TYPESAFE_", "FLASH_"))}
    with subprocess.Popen(
        ["bash", "-c", f"exec {serve}"], env=env | {"PYTHONUNBUFFERED": "1"}, cwd=user.home,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
    ) as server:  # fmt: skip
        try:
            assert server.stdout is not None
            said = []
            for line in server.stdout:
                said.append(line)
                if line.startswith("export "):
                    break
            assert said and said[-1].startswith("export "), (
                f"{serve} printed no export line (ports 8787/8788 taken?): {''.join(said)}"
            )
            assert said[-1].strip() == export, said[-1]  # the README's line, fixed ports
            script = "\n".join([said[-1].strip(), *typed])
            typed_run = subprocess.run(
                ["bash", "-c", script], env=env, cwd=user.home, capture_output=True, text=True,
                timeout=600,
            )  # fmt: skip
            assert typed_run.returncode == 0, typed_run.stdout[-3000:] + typed_run.stderr[-3000:]
            assert "[completed] session" in typed_run.stdout, typed_run.stdout[-3000:]
            assert "You asked: “write hello.py that prints hello”" in typed_run.stdout
            [info] = list_sessions(user.sessions)
            assert info.workspace == str(user.home / "jmp-try")
            server.send_signal(signal.SIGINT)
            assert server.wait(timeout=60) == 0
        finally:
            if server.poll() is None:
                server.kill()


def test_sessions_outlive_uninstall_and_reinstall_with_uv_and_pipx(tmp_path: Path) -> None:
    checkout = checkout_copy(tmp_path)
    source = tree(checkout)
    with JevServer() as jev, FlashServer() as flash:
        user = Home(tmp_path, jev, flash)
        user("uv", "tool", "install", "--compile-bytecode", "--python", user.python, str(checkout))
        version = user("jmp", "--version").stdout
        assert version.startswith("jmp ") and "(installed, " in version, version
        site = Path(version.rsplit(", ", 1)[1].rstrip(")\n"))
        assert site.name == "site-packages" and not (site / "tests").exists()
        assert user("jev-harness", "--version").stdout.startswith("jev-harness ")
        _a_newcomers_first_hour(user, site, checkout)
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
        added = sorted(tree(checkout) - source)
        assert not added, f"installing wrote into the checkout: {added[:10]}"  # build/, egg-info
        user("pipx", "uninstall", "jmp-agent")
        assert not (user.bin / "jmp").exists()
        user("pipx", "install", str(checkout))
        _listed(user, session)
