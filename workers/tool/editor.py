"""OpenHands' FileEditorExecutor with a directory view that stays inside the workspace.

OpenHands lists a directory two levels deep with `Path.is_dir()`, which follows symbolic links:
`read .` would list the contents of a linked `/etc`. Here a link is shown as a link (`name@`)
and never entered, and a name that is not UTF-8 is shown escaped (`bad\\xff.txt`). Imported
by the tool worker's setup only (OpenHands is slow to import).

Each OpenHands FileEditor makes its own `/tmp/oh_editor_history_*` directory for `undo_edit`
and never removes it: every tool worker left two behind (4,000 of them in this machine's /tmp
after a few days of tests), holding copies of the person's files. Here the undo history lives
where the kernel says (`--editor-history`): its private runtime directory, removed when the
kernel closes the tool worker, or by the next kernel after a crash. Never the session
directory: the copies are unredacted (a key in a workspace file would be stored there).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from openhands.tools.file_editor.editor import FileEditor
from openhands.tools.file_editor.impl import FileEditorExecutor
from openhands.tools.file_editor.utils.history import FileHistoryManager

from protocol.text import clean


class WorkspaceEditor(FileEditor):
    """FileEditor whose directory view never follows a symbolic link."""

    def _format_directory_entry(self, root: Path, entry: Path) -> str:
        relative = "" if entry == root else "/" + entry.relative_to(root).as_posix()
        display = clean(root.as_posix() + relative)
        if entry != root and entry.is_symlink():
            return f"{display}@"  # a link, not followed (its target may be anywhere)
        return f"{display}/" if entry.is_dir() else display

    def _list_directory_for_view(self, path: Path) -> list[str]:
        visible = [path]
        for item in sorted(path.iterdir(), key=str):
            if item.name.startswith("."):
                continue
            visible.append(item)
            if item.is_dir() and not item.is_symlink():
                try:
                    children = sorted(item.iterdir(), key=str)
                except OSError:
                    continue
                visible.extend(c for c in children if not c.name.startswith("."))
        return [self._format_directory_entry(path, entry) for entry in visible]


def workspace_executor(workspace: Path, history_dir: Path | None = None) -> FileEditorExecutor:
    """A FileEditorExecutor for `workspace` whose editor is a WorkspaceEditor, its undo history
    in `history_dir` (None: OpenHands' own temporary directory, left behind as OpenHands does)."""
    executor = FileEditorExecutor(workspace_root=str(workspace))
    _drop_history_dir(executor.editor)  # that editor is replaced before any use
    editor = WorkspaceEditor(workspace_root=str(workspace))
    if history_dir is not None:
        _drop_history_dir(editor)
        history_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        editor._history_manager = FileHistoryManager(
            max_history_per_file=10, history_dir=history_dir
        )
    executor.editor = editor
    return executor


def _drop_history_dir(editor: FileEditor) -> None:
    """Remove the (still empty) temporary history directory a new FileEditor made."""
    with contextlib.suppress(OSError, AttributeError):
        os.rmdir(editor._history_manager.cache.directory)  # rmdir: never a non-empty one
