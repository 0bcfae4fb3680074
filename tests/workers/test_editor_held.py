"""The file editor reads a file through the descriptor the file tools' check opened (issue 32
item 3): OpenHands re-opened the path after the kernel's no-follow check, so a symbolic link
swapped in between was followed (the outside file's text shown, or copied into the workspace
by an insert) and a file grown since was read whole. The swaps here happen inside the call,
after the file is held, through OpenHands' own first step (`validate_path`) or its size check
(`validate_file`): real files, real links."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

INSIDE = "inside text\n"
OUTSIDE = "OUTSIDE-SECRET the workspace must never show\n"
GROWN = "GROWN-PAST-THE-CAP"


def _editor(workspace: Path, after_validate: Callable[[Path], None], where: str) -> Any:
    from workers.tool.editor import WorkspaceEditor

    class Swapping(WorkspaceEditor):
        """A WorkspaceEditor whose OpenHands step `where` runs `after_validate` first."""

        def validate_path(self, command: Any, path: Path) -> None:
            if where == "validate_path":
                after_validate(path)
            super().validate_path(command, path)

        def validate_file(self, path: Path) -> None:
            super().validate_file(path)
            if where == "validate_file":
                after_validate(path)

    return Swapping(workspace_root=str(workspace), max_file_size_mb=1)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(INSIDE)
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE)
    return workspace, outside


def _swap_for_link(outside: Path) -> Callable[[Path], None]:
    def swap(path: Path) -> None:
        os.unlink(path)
        os.symlink(outside, path)

    return swap


@pytest.mark.parametrize("command", ["view", "insert", "str_replace"])
def test_a_link_swapped_in_after_the_check_is_never_followed(
    files: tuple[Path, Path], command: str
) -> None:
    workspace, outside = files
    notes = workspace / "notes.txt"
    editor = _editor(workspace, _swap_for_link(outside), "validate_path")
    args: dict[str, Any] = {"command": command, "path": str(notes)}
    if command == "insert":
        args |= {"insert_line": 1, "new_str": "added"}
    if command == "str_replace":
        args |= {"old_str": "inside", "new_str": "edited"}
    shown = str(editor(**args).text)
    assert "OUTSIDE-SECRET" not in shown, shown
    assert outside.read_text() == OUTSIDE  # the link's target untouched
    if command == "view":
        assert "inside text" in shown, shown
    else:  # the edit is of the held text; the rename replaced the link, not its target
        assert not notes.is_symlink() and "OUTSIDE" not in notes.read_text()
        assert ("added" if command == "insert" else "edited text") in notes.read_text()


def test_a_file_grown_after_the_size_check_is_not_read_whole(files: tuple[Path, Path]) -> None:
    workspace, _ = files
    notes = workspace / "notes.txt"

    def grow(path: Path) -> None:
        with open(path, "a") as f:
            f.write((GROWN + "\n") * 200_000)  # about 3.8 MB, over the 1 MB cap

    editor = _editor(workspace, grow, "validate_file")
    shown = str(editor(command="view", path=str(notes)).text)
    assert GROWN not in shown and "inside text" in shown, shown[:2000]


def test_a_file_over_the_cap_is_refused_unread(files: tuple[Path, Path]) -> None:
    from openhands.tools.file_editor.exceptions import FileValidationError

    workspace, _ = files
    big = workspace / "big.txt"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # a sparse terabyte: read whole, it would never end
    editor = _editor(workspace, lambda path: None, "")
    with pytest.raises(FileValidationError, match="too large"):
        editor(command="view", path=str(big))
