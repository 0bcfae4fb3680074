"""The `result` line, whoever prints it (the CLI's printer, jev-harness's output): one shape,
redacted, an id that is no session id never echoed, and inert on a terminal while decoding to
the same value. In-process: the printers write into StringIO."""

from __future__ import annotations

import io
from typing import Any

from cli.printer import Printer
from jev_harness.cli.output import Output
from kernel.store.redact import Redactor
from tests.support.cli import json_line

KEY = "result-line-key-123456"
SUMMARY = f"done \x9b2J \u202etxt.exe {KEY} \x1b]0;title\x07 ünï"


def printed(printer: Any, data: dict[str, Any]) -> str:
    printer.result(data)
    return str(printer.out.getvalue())


def test_every_printer_writes_the_same_safe_result_line() -> None:
    data = {"session_id": "../../etc/passwd", "status": "completed", "summary": SUMMARY}
    cli = Printer(True, io.StringIO(), io.StringIO(), Redactor([KEY]))
    harness = Output(True, io.StringIO(), io.StringIO())
    harness.redactor.add(KEY)
    lines = [
        printed(cli, {**data, "session_dir": None}),
        printed(harness, {**data, "session_dir": None, "artifact": None}),  # as run prints it
    ]
    for line in lines:
        assert line.endswith("\n") and line.count("\n") == 1
        assert not any(c in line for c in "\x1b\x07\x9b\u202e"), line  # inert on a terminal
        message = json_line(line)
        assert list(message) == ["version", "session_id", "seq", "time", "kind", "data"]
        assert message["kind"] == "result" and message["seq"] is None
        assert message["session_id"] is None and message["data"]["session_id"] is None
        assert message["data"]["summary"] == SUMMARY.replace(KEY, "[REDACTED]")  # same value
    assert "ünï" in lines[0]  # non-ASCII stays as it is
