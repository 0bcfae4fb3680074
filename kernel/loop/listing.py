"""What the workspace held when a run started (`run_started.listing`): a bounded, breadth-first
listing that skips tool caches, with names that are not UTF-8 shown escaped."""

from __future__ import annotations

import os
from pathlib import Path

from protocol.text import clean

LISTING_LIMIT = 200
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".jmp", ".mypy_cache"}


def workspace_listing(root: Path, limit: int = LISTING_LIMIT) -> tuple[list[str], bool]:
    """Up to `limit` workspace paths (dirs end in /), breadth first, skipping tool caches."""
    found: list[str] = []
    queue = [root]
    while queue:
        current = queue.pop(0)
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIP_DIRS:
                continue
            rel = os.path.relpath(entry.path, root)
            is_dir = entry.is_dir(follow_symlinks=False)
            if len(found) >= limit:
                return found, True
            shown = clean(rel)  # a name that is not UTF-8 is shown escaped (\\xNN)
            found.append(shown + "/" if is_dir else shown)
            if is_dir:
                queue.append(Path(entry.path))
    return found, False
