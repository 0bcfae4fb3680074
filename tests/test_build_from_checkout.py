"""Building jmp from a checkout writes nothing into it, and the wheel's example scripts are
where an installed `jev-harness examples` looks (issue 37; cheap and offline, unlike
tests/test_install.py's uv and pipx installs).

The wheel is built the way uv, pipx and pip build a checkout (setuptools' PEP 517 backend, in
the source tree), with this venv's setuptools and no index. It is then installed, without its
dependencies, into a venv of its own whose dependencies are this venv's (a `.pth` line names its
site-packages: the editable install of this checkout is not loaded there), and that venv's
console script `jev-harness` is run: its `examples` are the wheel's share/jmp/examples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.cli import ROOT
from tests.support.install import checkout_copy, tree

try:
    import setuptools  # noqa: F401  (the build backend, in this venv: the test extra)
except ImportError:
    pytest.skip("no setuptools in this venv (make install puts it there)", allow_module_level=True)

EXAMPLES = ("research_task.py", "workspace_task.py")


def _env(tmp: Path) -> dict[str, str]:
    """Offline, no user pip configuration, temporary files in tmp/tmp (emptied by the build)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    (tmp / "tmp").mkdir()
    return env | {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "TMPDIR": str(tmp / "tmp"),
    }


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


def test_a_wheel_built_from_a_checkout_leaves_it_as_it_was_and_ships_the_examples(
    tmp_path: Path,
) -> None:
    checkout = checkout_copy(tmp_path)
    before = tree(checkout)
    env = _env(tmp_path)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
          str(checkout)], env, tmp_path)  # fmt: skip
    added = sorted(tree(checkout) - before)
    assert not added, f"the build wrote into the checkout: {added[:10]}"  # egg-info, build/
    assert not any((tmp_path / "tmp").iterdir()), "the build's temporary tree was left behind"
    [wheel] = wheels.glob("jmp_agent-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in EXAMPLES:
        assert any(n.endswith(f".data/data/share/jmp/examples/{name}") for n in names), names

    # Installed: a venv of its own with the wheel (the dependencies: this venv's, by a .pth).
    prefix = tmp_path / "installed"
    _run([sys._base_executable, "-m", "venv", "--without-pip", str(prefix)], env, tmp_path)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix)}))
    assert site.is_dir(), site
    (site / "zz-the-suites-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([*pip, "--python", str(prefix / "bin" / "python"), "install", "-q", "--no-deps",
          str(wheel)], env, tmp_path)  # fmt: skip
    shipped = prefix / "share" / "jmp" / "examples"
    for name in EXAMPLES:
        assert (shipped / name).read_bytes() == (ROOT / "examples" / name).read_bytes()
    user = tmp_path / "user"
    user.mkdir()
    harness = str(prefix / "bin" / "jev-harness")
    where = _run([harness, "examples"], env, user)
    assert f"the example task scripts are in {shipped}:" in where.stdout, where.stdout
    _run([harness, "examples", "--copy", "examples"], env, user)
    for name in EXAMPLES:
        assert (user / "examples" / name).read_bytes() == (shipped / name).read_bytes()
    sound = _run([harness, "check-task", "examples/research_task.py"], env, user)
    assert "check-task: sound" in sound.stdout, sound.stdout
