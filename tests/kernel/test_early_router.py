"""The router asked for before the session (issue 11): owned by whoever holds it, never left.

`cli/run.py` starts the router before the kernel's heavier imports and the session, then hands
it to `Models`; a run that fails in between closes it itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest

from cli import run as cli_run
from cli.options import Options
from cli.printer import Printer
from kernel.config.settings import Settings
from kernel.errors import ConfigError
from kernel.store.session import Session
from kernel.supervision import models as models_module
from kernel.supervision.models import Models, start_router


@pytest.fixture
def keys(embed_env: Path) -> Path:
    return embed_env


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_models_adopt_the_early_router_and_close_it(keys: Path, short_tmp: Path) -> None:
    settings = Settings.environment()
    router = start_router(settings, lambda text: text)
    session = Session.create(short_tmp / "home", keys)
    models = Models(session, settings, router)
    try:
        models.start()
        assert models._slots["router"].current is router  # not a second router
        assert models._slots["generator"].current is not None
        router.wait_ready(60)
        pid = router.pid
        assert pid is not None and not _gone(pid)
    finally:
        models.close()
        session.close()
    assert _gone(pid)
    assert not router.runtime_dir.exists()  # the adopted runtime dir went with the Models


def test_a_run_that_fails_before_its_models_closes_the_early_router(
    keys: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = short_tmp / "mcp.json"
    bad.write_text("{")  # the MCP config is read after the router was asked for
    monkeypatch.setenv("JMP_MCP_CONFIG", str(bad))
    started: list[Any] = []

    def recording(settings: Settings, redact: Any) -> Any:
        started.append(start_router(settings, redact))
        return started[-1]

    monkeypatch.setattr(models_module, "start_router", recording)
    options = Options(prompt="hello", json=True, workspace=keys, sessions_dir=str(short_tmp / "h"))
    with pytest.raises(ConfigError, match="not valid JSON"):
        cli_run.run(options, Printer(json=True))
    (router,) = started
    assert router.pid is not None and _gone(router.pid)
    assert not (short_tmp / "h").exists() or not any((short_tmp / "h").iterdir())


def test_no_early_router_without_a_prompt_or_a_key(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printer = Printer(json=True)
    settings = Settings.environment()
    for options in (Options(prompt=None, session="x"), Options(prompt="x", compact=True)):
        assert cli_run._early_router(options, settings, printer) is None
    monkeypatch.delenv("FLASH_API_KEY")
    no_key = Settings.environment()
    assert cli_run._early_router(Options(prompt="x"), no_key, printer) is None
