"""The file editor's undo history stays in the session's terminal directory, never in /tmp."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


def test_the_editor_keeps_its_history_in_the_given_dir_and_leaves_nothing_in_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenHands made two /tmp/oh_editor_history_* dirs per tool worker and removed neither."""
    from openhands.tools.file_editor.definition import FileEditorAction

    from workers.tool.editor import workspace_executor

    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "a.txt"
    target.write_text("one\n")
    history = tmp_path / "terminal" / "editor-history"

    executor = workspace_executor(workspace, history)
    edit = FileEditorAction(command="str_replace", path=str(target), old_str="one", new_str="two")
    assert not executor(edit).is_error
    assert target.read_text() == "two\n"
    assert list(private_tmp.iterdir()) == []  # both editors' temp dirs are gone
    assert any(history.iterdir())  # the old text is kept here
    undo = executor(FileEditorAction(command="undo_edit", path=str(target)))
    assert not undo.is_error and target.read_text() == "one\n"
