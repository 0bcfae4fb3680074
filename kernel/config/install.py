"""What this installation of jmp is: a source checkout or an installed copy, its version, and
where it keeps what a person makes. Stdlib only: `jmp --list` and `jmp --version` import it.

PROJECT is the directory that holds main.py. It is a **checkout** when the pyproject.toml that
builds jmp (its `name` is DISTRIBUTION) lies beside main.py: a source tree, with or without an
editable install (`make install`). A wheel never carries pyproject.toml, so an installed copy
(`uv tool install`, `pipx install`, `pip install`: main.py in site-packages) is not one.

- A checkout keeps its data inside, as docs/JMP.md "Sessions" says: PROJECT/.jmp/sessions and
  PROJECT/.jmp/mcp.json.
- An installed copy keeps it where users of command-line tools look, never inside the package
  (an uninstall or a reinstall would delete it): sessions under $XDG_DATA_HOME/jmp/sessions
  (~/.local/share/jmp/sessions), the MCP config at $XDG_CONFIG_HOME/jmp/mcp.json
  (~/.config/jmp/mcp.json). As the XDG spec says, a relative value of those variables is
  ignored.
- `--sessions-dir` / JMP_SESSIONS_DIR and JMP_MCP_CONFIG override both.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kernel.errors import ConfigError

PROJECT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "jmp-agent"  # the name on PyPI ("jmp" is DeepMind's JAX library)
_NAME = re.compile(r'(?m)^name\s*=\s*"jmp-agent"\s*$')
_VERSION = re.compile(r'(?m)^version\s*=\s*"([^"]+)"\s*$')
_PYPROJECT_BYTES = 64 * 1024


def _pyproject(project: Path) -> str | None:
    """The text of PROJECT/pyproject.toml when it is the one that builds jmp, else None."""
    try:
        with open(project / "pyproject.toml", "rb") as handle:
            text = handle.read(_PYPROJECT_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    return text if _NAME.search(text) else None


def is_checkout(project: Path = PROJECT) -> bool:
    """True for a source tree (data in PROJECT/.jmp), False for an installed copy."""
    return (project / "main.py").is_file() and _pyproject(project) is not None


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable, "")
    if os.path.isabs(value):
        return Path(value)
    try:
        return Path.home() / fallback
    except RuntimeError:  # no HOME and no passwd entry
        raise ConfigError(
            f"no home directory to keep jmp's data in: set HOME, {variable}, or "
            "JMP_SESSIONS_DIR and JMP_MCP_CONFIG"
        ) from None


def data_dir(project: Path = PROJECT) -> Path:
    """Where this installation keeps what a person makes (sessions), by default."""
    if is_checkout(project):
        return project / ".jmp"
    return _xdg("XDG_DATA_HOME", ".local/share") / "jmp"


def config_dir(project: Path = PROJECT) -> Path:
    """Where this installation reads its configuration (mcp.json) from, by default."""
    if is_checkout(project):
        return project / ".jmp"
    return _xdg("XDG_CONFIG_HOME", ".config") / "jmp"


def default_sessions_dir(project: Path = PROJECT) -> Path:
    """The sessions home when neither --sessions-dir nor JMP_SESSIONS_DIR is given."""
    return data_dir(project) / "sessions"


def default_mcp_config(project: Path = PROJECT) -> Path:
    """The MCP config read when JMP_MCP_CONFIG is not set (a missing file: no servers)."""
    return config_dir(project) / "mcp.json"


def version(project: Path = PROJECT) -> str:
    """jmp's version, the one every front end reports (`--version`, MCP serverInfo, ACP).

    A checkout's pyproject.toml is the truth there (installed metadata may be stale, or belong
    to another copy on sys.path); an installed copy's is its distribution's metadata."""
    text = _pyproject(project)
    found = _VERSION.search(text) if text is not None else None
    if found is not None:
        return found.group(1)
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def kind(project: Path = PROJECT) -> str:
    """ "checkout" or "installed", for what jmp prints about itself."""
    return "checkout" if is_checkout(project) else "installed"


# The import names of jmp's dependencies (pyproject.toml): one of them missing means this
# Python is not the one jmp was installed into, not a bug.
DEPENDENCIES = (
    "msgspec", "zmq", "psutil", "openai", "openhands", "typesafe_sdk", "mcp", "pydantic",
    "lxml", "acp", "anyio", "httpx",
)  # fmt: skip


def missing_dependency(
    exc: BaseException, project: Path = PROJECT, command: str = "jmp"
) -> str | None:
    """For an ImportError of one of jmp's dependencies: what to do about it (which Python, what
    to install, then which `command` of it to run), else None."""
    import sys

    name = getattr(exc, "name", None) or ""
    if not isinstance(exc, ImportError) or name.partition(".")[0] not in DEPENDENCIES:
        return None
    this = f"Python {sys.version.split()[0]} ({sys.executable})"
    if is_checkout(project):
        how = (
            f"in the checkout, `make install` (it makes .venv with Python >= 3.12), then run "
            f"{project / '.venv' / 'bin' / command}; or install it as a tool: "
            f"`uv tool install --compile-bytecode {project}` or `pipx install {project}`, "
            f"then run `{command}`"
        )
    else:
        how = (
            "install jmp as a tool, `uv tool install --compile-bytecode jmp-agent` or "
            f"`pipx install jmp-agent`, then run `{command}`"
        )
    return f"{this} lacks jmp's dependency {name!r}: {how}"


def examples_dir(project: Path = PROJECT) -> Path | None:
    """Where this installation's example task scripts are: a checkout's examples/, else the
    wheel's data files (share/jmp/examples under the environment, or the user scheme's for
    `pip install --user`); None when neither is there."""
    import sysconfig

    if is_checkout(project):
        return project / "examples"
    schemes = [sysconfig.get_path("data")]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names():
        schemes.append(sysconfig.get_path("data", user))
    for base in schemes:
        found = Path(base) / "share" / "jmp" / "examples"
        if (found / "workspace_task.py").is_file():
            return found
    return None


def program(script: str, module: str) -> str:
    """The program a `--help` usage line names: the console script `script` when that is what
    ran (`jmp-chaos`, `jev-harness-mcp`, `jmp-demo`), else `python -m module`."""
    import sys

    return script if os.path.basename(sys.argv[0]) == script else f"python -m {module}"
