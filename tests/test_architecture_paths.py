"""docs/ARCHITECTURE.md's "Where to change what" table points at real files only."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_path_in_where_to_change_what_exists() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("## Where to change what", 1)[1].split("\n## ", 1)[0]
    paths = re.findall(r"`([A-Za-z_][\w/.-]*\.(?:py|md))`", table)
    assert len(paths) >= 10
    missing = [p for p in paths if "/" in p and not (ROOT / p).exists()]
    assert not missing, missing
