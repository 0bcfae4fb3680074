"""The seed's Python boundary (CONTRACT.md section 4) against the loopback servers, for the tests
that embed the kernel: the model variables pointed at the servers, and an Agent built the way
the seed builds one. The `embed_env` fixture (tests/conftest.py) is `point_at` for a test."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

JEV_KEY = "embed-jev-key-123456"
FLASH_KEY = "embed-flash-key-123456"


def point_at(monkeypatch: pytest.MonkeyPatch, servers: tuple[Any, Any], root: Path) -> Path:
    """The model keys and the loopback servers' URLs in the environment; a fresh workspace
    ROOT/ws, returned."""
    jev, flash = servers
    monkeypatch.setenv("TYPESAFE_API_KEY", JEV_KEY)
    monkeypatch.setenv("TYPESAFE_BASE_URL", jev.url)
    monkeypatch.setenv("FLASH_API_KEY", FLASH_KEY)
    monkeypatch.setenv("FLASH_BASE_URL", flash.url)
    workspace = root / "ws"
    workspace.mkdir()
    return workspace


def build_agent(
    home: Path, workspace: Path, *, on_event: Any = None, tools_cls: Any = None, **hooks: Any
) -> Any:
    """A new session in HOME and its Agent, composed as CONTRACT.md section 4 shows (no MCP
    servers); `tools_cls` replaces main.Tools, `hooks` go to the Agent."""
    import main

    session = main.Session.create(home, workspace, on_event=on_event)
    return main.Agent(
        session,
        main.Models(session, main.Settings.environment()),
        (tools_cls or main.Tools)(workspace, session.directory / "terminal", None),
        policy=main.ContextPolicy(),
        instructions=main.instructions(),
        cancel=threading.Event(),
        **hooks,
    )
