"""One run's world: its dirs, loopback models, keys, spawn path and confinement.

Keys are fresh per run (a random tail, no token format, so only jmp's known-secret path can
redact them) so that two runs on one machine never see each other's; `marker` is a fresh word
found in this run's paths and in its MCP server's arguments, by which the probe tells this
run's processes from every other one on the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import string
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jmp_lab.servers import MCP_SERVER as MCP_SCRIPT
from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support import launch_dir
from tests.support.decoded import leaked

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.py"
PROBE_TASK = HERE / "probe_task.py"
MCP_SERVER = Path(MCP_SCRIPT)
KEY_NAMES = ("TYPESAFE_API_KEY", "FLASH_API_KEY", "DEEPSEEK_API_KEY", "CAMOFOX_ACCESS_KEY")
# In no shell's environment (a cold worker starts with JMP_KERNEL_PIDFD and pops it)
KERNEL_ONLY = ("JMP_KERNEL_PID", "JMP_KERNEL_PIDFD", "JMP_MCP_SERVERS")
ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31mred\x9b1m"
_STRIPPED = ("JMP_", "JEV_", "FLASH_", "TYPESAFE_", "DEEPSEEK_", "CAMOFOX_")
# A hostile launch directory plants a module for every top-level name an import could look up
# there (tests/support/launch_dir.py: the stdlib, every installed distribution, jmp's packages;
# `zmq.py`, `msgspec.py`, `queue.py`, `argparse.py`, `workers/`, ...): each writes a witness
# line, then hands over to the real module (so that the run goes on and every other row still
# means something).


_BASE_ENV: dict[str, str] = {}


def snapshot_environment() -> None:
    """Runs build their environment from this one, taken before any test ran: a test that
    sets a variable meanwhile (the suite's pool dir among them) never reaches a run."""
    _BASE_ENV.clear()
    _BASE_ENV.update(os.environ)


def base_environment() -> dict[str, str]:
    return dict(_BASE_ENV or os.environ)


def _word(n: int) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def fresh_keys() -> dict[str, str]:
    """Each with URL-reserved characters (`+`, `/`, `=`), so that its percent-encodings differ
    from it."""
    prefixes = {"TYPESAFE_API_KEY": "jevkey", "FLASH_API_KEY": "flashkey"}
    prefixes |= {"DEEPSEEK_API_KEY": "deepkey", "CAMOFOX_ACCESS_KEY": "foxkey"}
    return {name: f"{prefixes[name]}-{_word(7)}+{_word(7)}/{_word(3)}=" for name in KEY_NAMES}


def encoded_leaks(text: str, keys: dict[str, str]) -> list[str]:
    """Which keys can be decoded from text, and from which decoding: its base64 and hex
    characters, whatever lies between them (line breaks, spaces, words, JSON escapes), decoded
    in every alignment (tests/support/decoded.py). Not the redactor's own list of forms, so a
    form it lacks is found too."""
    return [f"{name} as {found}" for name, key in keys.items() for found in leaked(text, key)]


def confine(argv: list[str]) -> list[str]:
    """`argv` as an ordinary user would run it: no_new_privs always and, as root (which ignores
    the non-dumpable flag and file modes), every capability dropped from the bounding and
    inheritable sets, so nothing it starts can regain one."""
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run jmp confined"
    caps = ["--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    return [setpriv, "--no-new-privs", *caps, "--", *argv]


def _planted_module(witness: Path, launch: Path) -> str:
    return f'''"""Planted by a hostile launch directory: proof that jmp imported it."""
import os as _os, sys as _sys
with open({str(witness)!r}, "a") as _f:
    _f.write(f"{{_os.getpid()}} {{__name__}} {{' '.join(_sys.argv)}}\\n")
_here = {str(launch)!r}
_saved = list(_sys.path)
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != _here]
del _sys.modules[__name__]
try:
    import importlib as _importlib
    _real = _importlib.import_module(__name__)
finally:
    _sys.path[:] = _saved
_sys.modules[__name__] = _real
'''


@dataclass
class World:
    """A short temp dir holding the sessions dir, the launch dir (the workspace, where the front
    end starts), the probe's output dir and the MCP config; the loopback models; the keys."""

    path: Any  # a SpawnPath (tests/security/paths.py)
    confined: bool
    hostile: bool = True  # plant modules in the launch dir
    umask: int | None = None  # the front end's umask (None: the suite's own)
    key_file: bool = False  # the model keys in the key file alone (kernel/config/keys.py)
    wrapper: tuple[str, ...] = ()  # a confinement the front end runs under (after the umask)
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="jsm", dir="/tmp")))
    keys: dict[str, str] = field(default_factory=fresh_keys)
    jev: JevServer = field(default_factory=JevServer)
    flash: FlashServer = field(default_factory=FlashServer)

    def __post_init__(self) -> None:
        self.marker = self.tmp.name + _word(6)
        self.home = self.tmp / "sessions"
        self.launch = self.tmp / "ws"
        self.out = self.tmp / "out"
        self.witness = self.tmp / "witness.txt"
        self.effect = self.launch / "effect.txt"
        self.mcp_config = self.tmp / "mcp.json"
        self.config_home = self.tmp / "config"
        self.mcp_secrets = {"arg": f"mcparg-{_word(12)}", "env": f"mcpenv-{_word(12)}"}
        for d in (self.launch, self.out):
            d.mkdir()
        # The workspace's own file of keys, which the untrusted code prints encoded; with
        # `key_file`, jmp's key file instead (`jmp --setup`'s), and no model key in the env.
        self.env_file = self.launch / ".env"
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in self.keys.items()))
        if self.key_file:
            from kernel.config import keys

            del self.keys["DEEPSEEK_API_KEY"]  # set, it would win over the file's Flash key
            stored = {name: self.keys[name] for name in keys.STORED}
            self.env_file = keys.write(stored, self.config_home / "jmp" / keys.FILE_NAME)
        os.chmod(self.out, 0o777)
        self.jev.__enter__()
        self.flash.__enter__()
        server = {
            "command": sys.executable,
            "args": [
                str(MCP_SERVER),
                f"--api-key={self.mcp_secrets['arg']}",
                "--note",
                self.keys["FLASH_API_KEY"],  # a careless config: a model key as an argument
                "--note",
                self.marker,
            ],
            "env": {"NOTES_TOKEN": self.mcp_secrets["env"], "FAKE_MCP_STDERR_ARGS": "1"},
        }
        self.mcp_config.write_text(json.dumps({"mcpServers": {"notes": server}}))
        if self.hostile:
            planted = _planted_module(self.witness, self.launch)
            for name in sorted(launch_dir.names()):
                path = self.launch / name / "__init__.py" if name in launch_dir.OURS else None
                if path is not None:
                    path.parent.mkdir()
                (path or self.launch / f"{name}.py").write_text(planted)

    def close(self) -> None:
        self.jev.__exit__(None, None, None)
        self.flash.__exit__(None, None, None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self) -> dict[str, str]:
        """The front end's environment: the user's own settings and keys removed, this run's
        keys (all four: each one set is a secret, used or not), models, dirs and spawn path."""
        env = {k: v for k, v in base_environment().items() if not k.startswith(_STRIPPED)}
        env |= self.keys
        if self.key_file:  # only the file holds them (the Camofox key stays a variable)
            for name in ("TYPESAFE_API_KEY", "FLASH_API_KEY"):
                del env[name]
        env |= {
            "TYPESAFE_BASE_URL": self.jev.url,
            "FLASH_BASE_URL": self.flash.url,
            "JMP_SESSIONS_DIR": str(self.home),
            "JMP_MCP_CONFIG": str(self.mcp_config),
            "XDG_CONFIG_HOME": str(self.config_home),  # the key file (kernel/config/keys.py)
            "PYTHONUNBUFFERED": "1",
        }
        return env | self.path.env()

    def wrap(self, argv: list[str]) -> list[str]:
        if self.umask is not None:  # sh execs the front end: the pid stays the front end's
            argv = ["/bin/sh", "-c", f'umask {self.umask:03o}; exec "$@"', "sh", *argv]
        argv = [*self.wrapper, *argv]
        return confine(argv) if self.confined else argv

    def probe_command(self) -> str:
        """The shell command of the probe (one line: OpenHands refuses several commands)."""
        return f"{sys.executable} -I {PROBE} {self.out} {self.marker} {self.env_file}"

    def secrets(self) -> dict[str, str]:
        """Every value that must never leave: the keys and the MCP config's secrets."""
        return self.keys | {f"MCP {k}": v for k, v in self.mcp_secrets.items()}

    def probe_report(self) -> dict[str, Any]:
        path = self.out / "probe.json"
        assert path.exists(), "the probe did not run"
        return dict(json.loads(path.read_text()))

    def environ_dump(self) -> bytes:
        return (self.out / "environ.bin").read_bytes()

    def witnesses(self) -> list[str]:
        return self.witness.read_text().splitlines() if self.witness.exists() else []


def session_bytes(directory: Path) -> bytes:
    """Every byte stored under a directory (log, artifacts, checkpoints, sqlite)."""
    if not directory.exists():
        return b""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def sqlite_text(path: Path) -> str:
    """Every text value of every table of an SQLite database (its WAL included), read through
    SQLite: the raw file splits a long value across pages."""
    import sqlite3

    found: list[str] = []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            try:
                rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.Error:  # (a virtual table whose module this Python lacks)
                continue
            found += [v for row in rows for v in row if isinstance(v, str)]
    finally:
        db.close()
    return "\n".join(found)


def iter_leaks(text: str, secrets_: dict[str, str]) -> Iterator[str]:
    for name, value in secrets_.items():
        if value in text:
            yield name
