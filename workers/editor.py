"""OpenHands' FileEditorExecutor with a directory view that stays inside the workspace.

OpenHands lists a directory two levels deep with `Path.is_dir()`, which follows symbolic links:
`read .` would list the contents of a linked `/etc`. Here a link is shown as a link (`name@`)
and never entered, and a name that is not UTF-8 is shown escaped (`bad\\xff.txt`). Imported
by the tool worker's setup only (OpenHands is slow to import).
"""

from __future__ import annotations

from pathlib import Path

from openhands.tools.file_editor.editor import FileEditor
from openhands.tools.file_editor.impl import FileEditorExecutor

from protocol.text import shown_name


class WorkspaceEditor(FileEditor):
    """FileEditor whose directory view never follows a symbolic link."""

    def _format_directory_entry(self, root: Path, entry: Path) -> str:
        relative = "" if entry == root else "/" + entry.relative_to(root).as_posix()
        display = shown_name(root.as_posix() + relative)
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


def workspace_executor(workspace: Path) -> FileEditorExecutor:
    """A FileEditorExecutor for `workspace` whose editor is a WorkspaceEditor."""
    executor = FileEditorExecutor(workspace_root=str(workspace))
    executor.editor = WorkspaceEditor(workspace_root=str(workspace))
    return executor
