"""Issue 34 item 1: `jmp --setup` and the key file it writes (kernel/config/keys.py).

The setup runs in a real terminal (a pty): keys typed are never echoed, each is checked with
its service (loopback servers that refuse a wrong key), and the file is 0600 in a 0700
directory that another user (`setpriv --reuid 65534`, every capability dropped: what an
ordinary user could do) can neither list nor read. The CLI runs on the file's keys, the
environment wins over it, and a file others may read is refused by name.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from kernel.config import keys
from kernel.errors import ConfigError
from tests.support.cli import FLASH_KEY, JEV_KEY, ROOT, Cli
from tests.support.lossy import fsync as lossy_fsync
from tests.support.lossy import fuse, lossy_disk

WRONG = "tsk-WRONG-0000000000000000"
NOBODY = 65534


class Terminal:
    """`python main.py ARGS` on a pty, as a person at a terminal runs it."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once (nothing of pytest's runs here)
            os.execve(sys.executable, [sys.executable, str(ROOT / "main.py"), *args], env)
        self.seen = b""

    def expect(self, text: str, times: int = 1, timeout: float = 180) -> str:
        """Read until TEXT has appeared TIMES times (a bound on a hang, not a timing). Type a
        key only once its prompt is out: getpass turns echo off before it writes the prompt,
        and on again after the answer."""
        deadline = time.monotonic() + timeout
        while self.seen.count(text.encode()) < times:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} in {self.seen.decode(errors='replace')!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                assert chunk, f"ended before {text!r}: {self.seen.decode(errors='replace')!r}"
                self.seen += chunk
        return self.seen.decode(errors="replace")

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def close(self) -> int:
        while True:  # the rest of the output, then the exit status
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk
        os.close(self.fd)
        return os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])


def _setup_env(tmp: Path, jev_url: str, flash_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TYPESAFE_", "FLASH_"))}
    env.pop("DEEPSEEK_API_KEY", None)
    env |= {"XDG_CONFIG_HOME": str(tmp / "config"), "TERM": "dumb"}
    env |= {"TYPESAFE_BASE_URL": jev_url, "FLASH_BASE_URL": flash_url}
    return env


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed when this returns


def test_setup_checks_each_key_never_echoes_and_stores_them_privately(short_tmp: Path) -> None:
    """Failed before: `jmp --setup` was a usage error."""
    with JevServer(key=JEV_KEY) as jev, FlashServer(key=FLASH_KEY) as flash:
        env = _setup_env(short_tmp, jev.url, flash.url)
        term = Terminal(["--setup"], env)
        term.expect("Jev key")
        term.type(WRONG)
        term.expect("refused this key")
        term.expect("Jev key", times=2)  # asked again
        term.type(JEV_KEY)
        term.expect("accepted it")
        term.expect("Flash key")
        term.type(FLASH_KEY)
        term.expect("stored in")
        assert term.close() == 0
        bearers = {r["headers"].get("Authorization") for r in jev.requests + flash.requests}
    for typed in (WRONG, JEV_KEY, FLASH_KEY):
        assert typed not in term.seen.decode(errors="replace"), "a key was echoed"
    assert bearers == {f"Bearer {WRONG}", f"Bearer {JEV_KEY}", f"Bearer {FLASH_KEY}"}
    path = short_tmp / "config" / "jmp" / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert keys.read(path) == {"TYPESAFE_API_KEY": JEV_KEY, "FLASH_API_KEY": FLASH_KEY}
    assert [p.name for p in path.parent.iterdir()] == ["keys.json"]  # no temporary left


def test_setup_says_when_a_service_cannot_be_reached(short_tmp: Path) -> None:
    env = _setup_env(short_tmp, _closed_port(), _closed_port())
    term = Terminal(["--acp", "--setup"], env)  # terminal auth appends its args to `--acp`
    term.expect("Jev key")
    term.type(JEV_KEY)
    said = term.expect("stored unchecked")
    assert "could not reach http://127.0.0.1:" in said
    term.expect("Flash key")
    term.type(FLASH_KEY)
    term.expect("jmp setup: stored in")
    assert term.close() == 0
    assert keys.read(short_tmp / "config" / "jmp" / "keys.json")["FLASH_API_KEY"] == FLASH_KEY


def test_an_interrupted_setup_stores_nothing(short_tmp: Path) -> None:
    env = _setup_env(short_tmp, _closed_port(), _closed_port())
    term = Terminal(["--setup"], env)
    term.expect("Jev key")
    term.type(JEV_KEY)
    term.expect("Flash key")
    os.write(term.fd, b"\x03")  # Ctrl+C
    term.expect("nothing was stored")
    assert term.close() == 2
    assert not (short_tmp / "config" / "jmp" / "keys.json").exists()


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed"
    drop = ["--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    if os.geteuid() == 0:  # root would read anything: no capability, as an ordinary user
        drop += ["--bounding-set=-all", "--inh-caps=-all"]
    return subprocess.run([setpriv, *drop, "--", *argv], capture_output=True, text=True)


def test_another_user_can_neither_list_nor_read_the_key_file(short_tmp: Path) -> None:
    os.chmod(short_tmp, 0o755)  # the path to the directory is open: only its own modes guard
    config = short_tmp / "config"
    config.mkdir(mode=0o755)
    path = keys.write({keys.JEV: JEV_KEY, keys.FLASH: FLASH_KEY}, config / "jmp" / "keys.json")
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o644)  # as if opened up by hand: a rewrite closes both again
    keys.write({keys.JEV: JEV_KEY}, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    (config / "README").write_text("open to all\n")
    os.chmod(config / "README", 0o644)
    assert _as_nobody("cat", str(config / "README")).stdout == "open to all\n"  # the row can fail
    listed, read = _as_nobody("ls", str(path.parent)), _as_nobody("cat", str(path))
    assert listed.returncode != 0 and "Permission denied" in listed.stderr
    assert read.returncode != 0 and "Permission denied" in read.stderr
    assert JEV_KEY not in read.stdout + listed.stdout


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = keys.write({keys.JEV: JEV_KEY, keys.FLASH: FLASH_KEY}, tmp_path / "jmp" / "keys.json")
    env = {"TYPESAFE_API_KEY": "tsk-from-the-environment", "DEEPSEEK_API_KEY": "sk-deepseek-env"}
    assert keys.load(env, path) == []  # the DeepSeek variable fills the Flash slot
    assert env == {
        "TYPESAFE_API_KEY": "tsk-from-the-environment",
        "DEEPSEEK_API_KEY": "sk-deepseek-env",
    }
    blank = {"TYPESAFE_API_KEY": "  "}
    assert keys.load(blank, path) == ["TYPESAFE_API_KEY", "FLASH_API_KEY"]
    assert blank == {"TYPESAFE_API_KEY": JEV_KEY, "FLASH_API_KEY": FLASH_KEY}


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: os.chmod(p, 0o640), "is open to others (mode 0640)"),
        (lambda p: p.write_text('{"keys": "x"}'), "is not one jmp wrote"),
        (lambda p: (p.unlink(), p.symlink_to(p.parent / "elsewhere")), "cannot read the key file"),
    ],
)
def test_an_unusable_key_file_is_refused_by_name(tmp_path: Path, make: object, said: str) -> None:
    path = keys.write({keys.JEV: JEV_KEY}, tmp_path / "jmp" / "keys.json")
    (tmp_path / "jmp" / "elsewhere").write_text("{}")
    make(path)  # type: ignore[operator]
    with pytest.raises(ConfigError, match=str(path)) as refused:
        keys.read(path)
    assert said in str(refused.value) and JEV_KEY not in str(refused.value)


def test_the_cli_runs_on_the_key_file_and_never_shows_its_keys(jmp: Cli) -> None:
    """No key variable set: the run reaches both models with the file's keys; they are
    secrets like the environment's (the answer holding them comes out redacted)."""
    keys.write({keys.JEV: JEV_KEY, keys.FLASH: FLASH_KEY}, jmp.config_home / "jmp" / "keys.json")
    env = jmp.env(TYPESAFE_API_KEY=None, FLASH_API_KEY=None)
    jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    jmp.flash.queue([{"text": f"Your keys are {JEV_KEY} and {FLASH_KEY}."}])
    done = jmp.task("what are my keys?", env=env)
    assert done.result["status"] == "completed", done.stderr
    bearers = {r["headers"].get("Authorization") for r in jmp.jev.requests + jmp.flash.requests}
    assert bearers == {f"Bearer {JEV_KEY}", f"Bearer {FLASH_KEY}"}
    log = jmp.log_path(done.result["session_id"]).read_text()
    for key in (JEV_KEY, FLASH_KEY):
        assert key not in done.stdout + done.stderr + log
    assert "[REDACTED]" in done.result["summary"]


def test_a_key_file_open_to_others_stops_the_cli_before_any_session(jmp: Cli) -> None:
    path = keys.write({keys.JEV: JEV_KEY}, jmp.config_home / "jmp" / "keys.json")
    os.chmod(path, 0o604)
    done = jmp.task("hello", env=jmp.env(TYPESAFE_API_KEY=None))
    assert done.code == 2 and f"chmod 600 {path}" in done.stderr
    assert not jmp.home.exists() or not any(jmp.home.iterdir())
    assert jmp.requests_seen() == 0


@fuse
@pytest.mark.timeout(300)
def test_the_stored_keys_survive_a_power_cut_the_moment_the_write_returns(short_tmp: Path) -> None:
    """On the power-cut simulator (strict: everything not fsynced is lost), cut right after
    `write` returned: the file is there, whole, 0600, in its 0700 dir. The control (the same
    bytes written without fsync) is lost, so the cut does lose what was not made durable."""
    with lossy_disk(short_tmp / "fs") as disk:
        (disk.mount / "config").mkdir()
        lossy_fsync(disk.mount)
        lossy_fsync(disk.mount / "config")
        path = disk.mount / "config" / "jmp" / "keys.json"
        keys.write({keys.JEV: JEV_KEY, keys.FLASH: FLASH_KEY}, path)
        (disk.mount / "config" / "control.json").write_text(path.read_text())
        disk.freeze()
        disk.cut("lose", "lose")
        kept = disk.backing / "config" / "jmp" / "keys.json"
        assert not (disk.backing / "config" / "control.json").exists(), "the cut lost nothing"
        assert keys.read(kept) == {"TYPESAFE_API_KEY": JEV_KEY, "FLASH_API_KEY": FLASH_KEY}
        assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
