"""Issue 9 items 2-4, 13, 16 piece by piece: which config values are secrets, which variables
are keys, and what the two readable views and the result lines let through."""

from __future__ import annotations

import io
import json

import pytest

from cli.printer import Printer
from jev_harness.cli.output import Output
from kernel.config.mcp import McpServers, parse_servers
from kernel.config.settings import Settings
from protocol.codec import make_event
from protocol.events import ErrorData, FinalData, ToolFinishedData, ToolStartedData

ESC = "\x1b]0;owned\x07\x1b[2J\x1b[1;31m\x9b2J\u202eevil\r"
SID = "0123456789abcdef0123456789abcdef"


def _secrets(config: dict[str, object]) -> list[str]:
    return McpServers(parse_servers({"mcpServers": config}), None).secrets


def test_mcp_secrets_in_arguments_urls_and_headers() -> None:
    stdio = {
        "command": "srv",
        "args": [
            "--api-key=argkey-111111",
            "--token",
            "argtok-222222",
            "GITHUB_TOKEN=envarg-333333",
            "--verbose",
            "--format=json",
            "serve",
            "https://user:pw-4444444@h.example/v1/Zk29fjQ8sLp3Xw7Rm4Tn5Yb?key=qkey-55555&page=2",
        ],
        "env": {"A_TOKEN": "envval-666666"},
    }
    remote = {
        "url": "https://u2:pw-7777777@mcp.example/mcp?access_token=qtok-888888&mode=full",
        "headers": {"Authorization": "Bearer hdr-999999999"},
    }
    found = set(_secrets({"s": stdio, "r": remote}))
    expected = {
        "argkey-111111",
        "argtok-222222",
        "envarg-333333",
        "pw-4444444",
        "Zk29fjQ8sLp3Xw7Rm4Tn5Yb",
        "qkey-55555",
        "envval-666666",
        "pw-7777777",
        "qtok-888888",
        "hdr-999999999",
    }
    assert expected <= found
    for plain in ("--verbose", "json", "serve", "2", "full", "srv", "h.example", "v1", "mcp"):
        assert plain not in found


def test_every_key_variable_that_is_set_is_a_secret() -> None:
    env = {
        "TYPESAFE_API_KEY": "jev-key-aaaaaa",
        "FLASH_API_KEY": "flash-key-bbbbbb",
        "DEEPSEEK_API_KEY": "deepseek-key-cccccc",  # FLASH_API_KEY wins; still a secret
        "CAMOFOX_ACCESS_KEY": "fox-key-dddddd",
    }
    settings = Settings.environment(env)
    assert settings.flash_api_key == "flash-key-bbbbbb"
    assert set(settings.secrets) == set(env.values())
    assert "deepseek-key-cccccc" not in repr(settings)


def _event(seq: int, data: object) -> object:
    return make_event(SID, seq, 1.0, data)  # type: ignore[arg-type]


def test_the_readable_view_makes_model_tool_and_file_text_inert() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(json=False, out=out, err=err)
    printer.event(
        _event(1, ToolStartedData(call_id="c", tool="read", target=f"a{ESC}.txt", request="r"))
    )
    text = f"line one\n\tindented {ESC}\nline three"
    printer.event(_event(2, ToolFinishedData(call_id="c", tool="read", status="ok", text=text)))
    printer.event(_event(3, ErrorData(stage="tool", error_class="X", message=f"bad {ESC}")))
    printer.event(_event(4, FinalData(status="completed", summary=f"answer {ESC}\nsecond\tline")))
    printer.error(RuntimeError(f"broken {ESC}"))
    shown = out.getvalue() + err.getvalue()
    for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
        assert raw not in shown
    assert "\\x1b]0;owned\\x07" in shown and "\\u202eevil" in shown
    assert "second\tline" in out.getvalue() and "\tindented" in out.getvalue()


def test_the_result_line_is_redacted_and_names_only_a_valid_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "deepseek-key-eeeeee")
    for given, shown in ((SID, SID), ("../../etc/passwd", None), ("deepseek-key-eeeeee", None)):
        out = io.StringIO()
        Printer(json=True, out=out).result(
            {"session_id": given, "status": "error", "summary": "got deepseek-key-eeeeee"}
        )
        line = json.loads(out.getvalue())
        assert line["session_id"] == shown and line["data"]["session_id"] == shown
        assert line["data"]["summary"] == "got [REDACTED]"
        assert "deepseek-key-eeeeee" not in out.getvalue()


def test_jev_harness_output_is_redacted_and_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMOFOX_ACCESS_KEY", "fox-key-ffffff")
    out, err = io.StringIO(), io.StringIO()
    view = Output(json=False, out=out, err=err)
    view.event(_event(1, FinalData(status="completed", summary=f"found {ESC} fox-key-ffffff")))
    view.fail(f"ghp_{'a1' * 18} leaked {ESC}")  # a token format nobody configured
    shown = out.getvalue() + err.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown and "fox-key-ffffff" not in shown
    assert "ghp_" not in shown and shown.count("[REDACTED]") == 2
    result = io.StringIO()
    Output(json=True, out=result).result({"session_id": SID, "summary": "fox-key-ffffff"})
    assert "fox-key-ffffff" not in result.getvalue()
