"""Issue 9 items 2 and 16 through the real CLI: an invalid session id is never echoed.

Every key variable that is set is a secret (used or not); error messages are redacted. What a
run with workers lets leave, and what its shell can reach, are rows of the matrix
(tests/security: test_keys.py, test_reach.py, test_view.py), on both spawn paths and every
front end.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import Cli, Run, session_bytes, short_dir

# None of them matches a token format, so only the known-secret path can redact them.
KEYS = {
    "TYPESAFE_API_KEY": "jevkey-Pz81Ka0Qn5VbT3",
    "FLASH_API_KEY": "flashkey-7Hq2Lm9Xw4Rt",
    "DEEPSEEK_API_KEY": "deepkey-Ux3Yo6Ee2WdM8",  # set beside FLASH_API_KEY: unused, still secret
    "CAMOFOX_ACCESS_KEY": "foxkey-Jr5Nt0Bc7Gs2",
}


@pytest.fixture
def cli() -> Iterator[Cli]:
    tmp = short_dir()
    with JevServer() as jev, FlashServer() as flash:
        yield Cli(tmp, jev, flash)
    shutil.rmtree(tmp, ignore_errors=True)


def _env(cli: Cli, **changes: str | None) -> dict[str, str]:
    return cli.env(**{**KEYS, **changes})


def _bodies(cli: Cli) -> str:
    """Every model request body (the Authorization headers carry the keys by design)."""
    return json.dumps([r["body"] for r in cli.jev.requests + cli.flash.requests], default=str)


def _assert_no_key(cli: Cli, *runs: Run, sid: str | None = None) -> None:
    everything = "".join(run.stdout + run.stderr for run in runs) + _bodies(cli)
    stored = session_bytes(cli.home / sid).decode("utf-8", "replace") if sid else ""
    for name, key in KEYS.items():
        assert key not in everything, f"{name} leaked to stdout, stderr or a model request"
        assert key not in stored, f"{name} leaked into the session's files"


@pytest.mark.parametrize(
    "given", ["../../etc/passwd", KEYS["FLASH_API_KEY"], "0" * 31 + "g", "/tmp", " "]
)
def test_an_invalid_session_id_is_never_echoed(cli: Cli, given: str) -> None:
    """Items 16 and 2: the result line says null; the error on stderr names no key."""
    run = cli.run("--session", given, env=_env(cli))
    assert run.code == 2 and run.result["status"] == "error"
    assert run.result["session_id"] is None and run.lines[-1]["session_id"] is None
    assert run.stderr.strip()
    _assert_no_key(cli, run)
    readable = cli.run("--session", given, env=_env(cli), json_flag=False)
    assert readable.code == 2
    _assert_no_key(cli, readable)
