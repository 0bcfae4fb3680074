"""Where an installation keeps what a person makes (kernel/config/install.py, issue 23): a
checkout in PROJECT/.jmp, an installed copy under the XDG base directories, never inside the
installed package; JMP_SESSIONS_DIR / --sessions-dir / JMP_MCP_CONFIG override both. One
version for every front end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.config import install
from kernel.config.mcp import load_servers
from kernel.store.catalog import sessions_home
from tests.support.cli import ROOT

PYPROJECT = '[project]\nname = "jmp-agent"\nversion = "9.8.7"\n'


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "JMP_SESSIONS_DIR", "JMP_MCP_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return home


def _tree(root: Path, pyproject: str | None) -> Path:
    root.mkdir(parents=True)
    (root / "main.py").write_text("")
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    return root


def test_a_source_tree_keeps_its_data_inside(tmp_path: Path, xdg: Path) -> None:
    checkout = _tree(tmp_path / "src", PYPROJECT)
    assert install.is_checkout(checkout) and install.kind(checkout) == "checkout"
    assert install.default_sessions_dir(checkout) == checkout / ".jmp" / "sessions"
    assert install.default_mcp_config(checkout) == checkout / ".jmp" / "mcp.json"
    assert install.version(checkout) == "9.8.7"


def test_an_installed_copy_keeps_its_data_where_the_xdg_dirs_say(
    tmp_path: Path, xdg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # site-packages: main.py and no pyproject.toml (a wheel never carries one), or another
    # project's pyproject.toml lying there.
    for site in (_tree(tmp_path / "a", None), _tree(tmp_path / "b", '[project]\nname = "x"\n')):
        assert not install.is_checkout(site) and install.kind(site) == "installed"
        assert install.default_sessions_dir(site) == xdg / ".local/share/jmp/sessions"
        assert install.default_mcp_config(site) == xdg / ".config/jmp/mcp.json"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    assert install.default_sessions_dir(site) == tmp_path / "data" / "jmp" / "sessions"
    assert install.default_mcp_config(site) == tmp_path / "conf" / "jmp" / "mcp.json"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # the XDG spec: ignored
    assert install.default_sessions_dir(site) == xdg / ".local/share/jmp/sessions"


def test_the_variables_override_both(tmp_path: Path, xdg: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("JMP_SESSIONS_DIR", str(tmp_path / "mine"))
    assert sessions_home() == tmp_path / "mine"
    assert sessions_home(tmp_path / "flag") == tmp_path / "flag"
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": {"command": "x"}}}')
    monkeypatch.setenv("JMP_MCP_CONFIG", str(config))
    assert sorted(load_servers().servers) == ["a"]


def test_this_checkout_is_one_and_every_front_end_reports_its_version() -> None:
    assert install.is_checkout() and install.PROJECT == ROOT
    version = install.version()
    assert version[0].isdigit() and version != "unknown"
    jmp = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "--version"], capture_output=True, text=True
    )
    assert jmp.returncode == 0 and jmp.stdout == f"jmp {version} (checkout, {ROOT})\n"
    harness = subprocess.run(
        [sys.executable, "-m", "jev_harness.cli", "--version"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert harness.returncode == 0 and harness.stdout == f"jev-harness {version} (jmp-agent)\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "XDG_"))}
    listed = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "--list"], capture_output=True, text=True, env=env
    )
    assert listed.stdout.endswith(f"sessions are kept in {ROOT / '.jmp' / 'sessions'}\n")


def test_an_installed_layout_lists_and_names_the_xdg_sessions_dir(tmp_path: Path) -> None:
    """main.py and its packages copied as a wheel lays them out (no pyproject.toml): `--list`
    and `--help` say the sessions are under ~/.local/share/jmp, none under the copy
    (2b9f963 kept them in site-packages/.jmp, deleted with the package)."""
    site = tmp_path / "site-packages"
    site.mkdir()
    shutil.copy(ROOT / "main.py", site)
    for package in ("cli", "kernel", "protocol", "host"):
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__py*"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    listed = subprocess.run(
        [sys.executable, "-E", "-s", str(site / "main.py"), "--list"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    sessions = tmp_path / "home" / ".local" / "share" / "jmp" / "sessions"
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == f"no sessions yet\nsessions are kept in {sessions}\n"
    helped = subprocess.run(
        [sys.executable, "-E", "-s", str(site / "main.py"), "--help"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert f"JMP_SESSIONS_DIR   where sessions live; now {sessions}" in helped.stdout
    assert "This copy is installed" in helped.stdout
    assert not (site / ".jmp").exists()


def test_a_python_without_the_dependencies_says_how_to_install(tmp_path: Path) -> None:
    """`python main.py "task"` with an interpreter lacking jmp's dependencies names the one
    missing and how to install (2b9f963: "internal error: ModuleNotFoundError: ...")."""
    base = getattr(sys, "_base_executable", "")
    probe = subprocess.run([base, "-s", "-c", "import msgspec"], capture_output=True)
    if not base or probe.returncode == 0:
        pytest.skip("no interpreter without jmp's dependencies here (the venv's base has them)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "PYTHON"))}
    mcp = ["examples/workspace_task.py", "--goal", "g", "--inputs", "{}"]
    for argv in (
        [str(ROOT / "main.py"), "hello"],
        ["-m", "jev_harness.cli", "run", "x.py", "--goal", "g", "--inputs", "{}"],
        ["-m", "apixly_jev_harness.mcp", *mcp],
        ["-m", "jev_harness.mcp", *mcp],
    ):  # the MCP lines: the seed's (issue 37)
        env["TYPESAFE_API_KEY"] = "k-123456789"
        done = subprocess.run(
            [base, "-s", *argv], capture_output=True, text=True, cwd=ROOT, env=env
        )
        assert done.returncode == 2, done.stderr
        assert "lacks jmp's dependency 'msgspec'" in done.stderr and "make install" in done.stderr
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr
        if "mcp" in argv[1]:
            assert str(ROOT / ".venv" / "bin" / "jev-harness-mcp") in done.stderr, done.stderr
