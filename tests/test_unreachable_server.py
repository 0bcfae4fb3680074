"""A model server that cannot be reached (issue 37): the error names its URL and the variable
that chose it, so a newcomer with a wrong TYPESAFE_BASE_URL or FLASH_BASE_URL (or a stopped
`jmp-demo --serve`) sees which one. Real CLI runs; the server is a port nothing listens on."""

from __future__ import annotations

import socket

import pytest

from tests.support.cli import Cli

pytestmark = pytest.mark.timeout(300)


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_unreachable_jev_or_flash_is_named_with_its_url(jmp: Cli) -> None:
    jev = _closed_port()
    run = jmp.exec(jmp.argv("--no-mcp", "hello"), env=jmp.env(TYPESAFE_BASE_URL=jev))
    assert run.code == 2 and run.result["status"] == "error"
    assert f"(the server at {jev}, TYPESAFE_BASE_URL)" in run.result["summary"], run.result
    flash = _closed_port() + "/v1"
    jmp.jev.script([{"route": "bash"}])
    run = jmp.exec(jmp.argv("--no-mcp", "hello"), env=jmp.env(FLASH_BASE_URL=flash))
    assert run.code == 2 and run.result["status"] == "error"
    assert f"(the server at {flash}, FLASH_BASE_URL)" in run.result["summary"], run.result
