"""The key file: the model keys `jmp --setup` stored, read by every front end at its start.

`$XDG_CONFIG_HOME/jmp/keys.json` (~/.config/jmp/keys.json), the user's own whatever copy of
jmp runs (a checkout too: keys belong to a person, not to a tree), `{"version": 1, "keys":
{"TYPESAFE_API_KEY": ..., "FLASH_API_KEY": ...}}`. Created 0600 in a 0700 directory by the
kernel's one atomic write (kernel/store/durable.py: a temporary file, fsynced, renamed over,
the directory fsynced; new directories' entries too): a power cut leaves the old file or the
new one, never a part. Read with O_NOFOLLOW; a file that is not a regular file of ours, or that
others may read or write, is refused by name (as ssh refuses such a key).

`load()` puts each key of the file that the environment lacks into the process environment,
so that from there on the file's keys are the environment's in every respect: each is a known
secret for every redactor (kernel/store/redact.py `environment_secrets`), the supervisor keeps
it out of every worker environment but its own (the tool worker's shells never see it), and
it reaches its model worker through the pool's environment pipe like any key. The environment
wins: a key variable that is set (the Flash slot: FLASH_API_KEY or DEEPSEEK_API_KEY) keeps its
value. Stdlib only; never logs a value.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from kernel.errors import ConfigError
from kernel.store import durable

FILE_NAME = "keys.json"
FILE_VERSION = 1
JEV = "TYPESAFE_API_KEY"
FLASH = "FLASH_API_KEY"
STORED = (JEV, FLASH)  # what the file may hold
# Each stored key and the variables that, set, win over it.
SLOTS = {JEV: (JEV,), FLASH: (FLASH, "DEEPSEEK_API_KEY")}
MAX_BYTES = 64 * 1024


def key_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME/jmp (a relative value is ignored, as the XDG spec says), else
    ~/.config/jmp."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(base):
        return Path(base) / "jmp"
    home = env.get("HOME", "")
    try:
        root = Path(home) if os.path.isabs(home) else Path.home()
    except RuntimeError:  # no HOME and no passwd entry
        raise ConfigError(
            "no home directory for jmp's key file: set HOME or XDG_CONFIG_HOME"
        ) from None
    return root / ".config" / "jmp"


def key_file(env: Mapping[str, str] | None = None) -> Path:
    return key_dir(env) / FILE_NAME


def read(path: Path | None = None) -> dict[str, str]:
    """The keys stored in PATH (default: `key_file()`); {} when there is no file. ConfigError
    names a file that is not ours alone or not a key file."""
    path = key_file() if path is None else path
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read the key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        _check_private(path, info)
        raw = handle.read(MAX_BYTES + 1)
    return _parse(path, raw)


def _check_private(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the key file {path} is not a regular file")
    if info.st_uid != os.geteuid():
        raise ConfigError(f"the key file {path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise ConfigError(
            f"the key file {path} is open to others (mode {mode:04o}): its keys are not used; "
            f"run `chmod 600 {path}`, or `jmp --setup` to write it again"
        )


def _parse(path: Path, raw: bytes) -> dict[str, str]:
    bad = ConfigError(
        f'the key file {path} is not one jmp wrote ({{"version": 1, "keys": {{...}}}}); '
        "run `jmp --setup` to write it again"
    )
    if len(raw) > MAX_BYTES:
        raise bad
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise bad from None
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if (
        not isinstance(doc, dict)
        or doc.get("version") != FILE_VERSION
        or not isinstance(keys, dict)
    ):
        raise bad
    found = {}
    for name in STORED:
        value = keys.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or not value.isprintable():
            raise bad
        found[name] = value.strip()
    return found


def load(environ: MutableMapping[str, str] | None = None, path: Path | None = None) -> list[str]:
    """Set each stored key whose slot the environment leaves empty; returns the names set."""
    environ = os.environ if environ is None else environ
    stored = read(key_file(environ) if path is None else path)
    added = []
    for name, value in stored.items():
        if not any(environ.get(v, "").strip() for v in SLOTS[name]):
            environ[name] = value
            added.append(name)
    return added


def load_or_error() -> ConfigError | None:
    """`load()`, its error returned (a front end reports it once its output exists)."""
    try:
        load()
    except ConfigError as exc:
        return exc
    return None


def write(keys: Mapping[str, str], path: Path | None = None) -> Path:
    """Store KEYS (merged over what the file holds) atomically: a 0600 file in a 0700 dir."""
    path = key_file() if path is None else path
    unknown = sorted(set(keys) - set(STORED))
    if unknown:
        raise ValueError(f"not a stored key: {unknown}")
    directory = path.parent
    _make_durable_dirs(directory)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise ConfigError(f"{directory} is not a directory of yours: the keys were not stored")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(directory, 0o700)  # it holds keys now: its listing is the owner's alone
    merged = {**_readable(path), **{k: v.strip() for k, v in keys.items()}}
    data = json.dumps({"version": FILE_VERSION, "keys": merged}, indent=2).encode() + b"\n"
    durable.write_atomic(directory, path.name, data, mode=0o600)  # temp, fsync, rename, fsync
    return path


def _make_durable_dirs(directory: Path) -> None:
    """DIRECTORY and its missing parents, each entry made durable (a power cut after `write`
    returned must not lose the directory that holds the file): the new ones 0700."""
    missing = []
    at = directory
    while not at.exists():
        missing.append(at)
        at = at.parent
    for new in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: it is there
            new.mkdir(mode=0o700)
        durable.fsync_dir(new.parent)


def _readable(path: Path) -> dict[str, str]:
    """What the file holds, or {} when it is unusable (a rewrite replaces it)."""
    try:
        return read(path)
    except ConfigError:
        return {}
