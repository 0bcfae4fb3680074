"""The live view says what a starting worker keeps it waiting for, and erases it afterwards."""

from __future__ import annotations

import io
import re
import threading

from cli.printer import Printer
from kernel.supervision.waits import add_listener, waiting


class Tty(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.wrote = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.wrote.set()
        return super().write(text)


def test_a_long_wait_for_the_tool_worker_is_shown_then_erased() -> None:
    out = Tty()
    printer = Printer(json=False, out=out)
    remove = add_listener(printer.worker_wait)
    try:
        with waiting("tool"):
            assert out.wrote.wait(30)  # shown once the wait passed half a second
            assert re.search(r"starting tools… \d+ s$", out.getvalue()), out.getvalue()
            for _ in range(300):  # the time so far, refreshed (bounded by redraws, not time)
                if "starting tools… 2 s" in out.getvalue():
                    break
                out.wrote.clear()
                assert out.wrote.wait(30)
            assert "starting tools… 2 s" in out.getvalue()
    finally:
        remove()
    assert out.getvalue().endswith("\r\033[K")  # gone when the worker is ready


def test_a_short_wait_shows_nothing_and_json_never_shows_it() -> None:
    out, json_out = Tty(), Tty()
    removers = [add_listener(Printer(json=False, out=out).worker_wait)]
    removers.append(add_listener(Printer(json=True, out=json_out).worker_wait))
    try:
        with waiting("router"):
            pass
        with waiting("generator"):
            assert json_out.wrote.wait(0.8) is False  # the --json stdout stays JSON lines
    finally:
        for remove in removers:
            remove()
    assert "starting the router" not in out.getvalue()
    assert json_out.getvalue() == ""
