"""The checkout as a user has it, for the tests that build or install jmp from one
(tests/test_install.py, tests/test_build_from_checkout.py): its files, without our venv,
caches, sessions, build products or the wheelhouse."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.cli import ROOT

KEPT = (
    "__pycache__", ".venv", ".git", ".jmp", "*.egg-info", "build", ".*_cache", ".wheelhouse",
    "crash-states",
)  # fmt: skip


def checkout_copy(tmp: Path) -> Path:
    """A copy of this checkout in tmp/jmp-checkout (what `git clone` would give, plus any file
    not committed yet)."""
    copy = tmp / "jmp-checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*KEPT))
    return copy


def tree(root: Path) -> set[str]:
    """Every path under root, relative: what a build must not add to."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}
