"""The chaos runner's rendered-fetch kills (jmp_lab/chaos/rendered.py): the harness worker
SIGKILLed while Chromium renders the entry page (nothing captured yet) and a link (the entry
page captured before), on a warm worker and a cold one; every invariant holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from jmp_lab.chaos.rendered import iterate, main
from tests.support.browser import needs_chromium


@needs_chromium
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_kill_while_the_entry_page_renders_breaks_no_invariant(
    short_tmp: Path, warm: bool
) -> None:
    it = iterate(warm, "entry", 0.3, short_tmp)
    assert it.violations == [], it.line()


@needs_chromium
def test_the_runner_kills_during_a_held_link_and_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--iterations", "1", "--seed", "3", "--first", "3"]) == 0
    out = capsys.readouterr().out
    assert "cold kill during link" in out and "1 kills during rendered fetches, 0 with" in out
