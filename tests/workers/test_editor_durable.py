"""What the file editor reports written survives a pulled plug (issue 21): a file it creates
or edits is on the disk, name and text, before the tool worker answers, so a `tool_finished`
that a client was shown is never contradicted by a missing, empty or old file after a cut.

OpenHands writes a temp file and renames it over the path, with no fsync: a cut then undoes
the rename (strict POSIX), or keeps the name with none of its text once any later fsync
commits it (a journal, as ext4's: here the kernel's fsync of `tool_finished` stands for it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jmp_lab.chaos.powercut.model import MODELS
from tests.support.lossy import fsync, fuse, lossy_disk


@fuse
@pytest.mark.parametrize("model", MODELS)
def test_a_file_the_editor_wrote_is_there_whole_after_a_power_cut(
    tmp_path: Path, model: str
) -> None:
    from openhands.tools.file_editor.definition import FileEditorAction

    from workers.tool.editor import workspace_executor

    with lossy_disk(tmp_path, model) as disk:
        workspace = disk.mount / "ws"
        workspace.mkdir()
        (workspace / "old.txt").write_text("old text\n")
        for durable in (workspace / "old.txt", workspace, disk.mount):
            fsync(durable)  # the person's file, on the disk before the agent starts
        executor = workspace_executor(workspace, tmp_path / "history")
        created = FileEditorAction(
            command="create", path=str(workspace / "new.txt"), file_text="new file\n"
        )
        edited = FileEditorAction(
            command="str_replace", path=str(workspace / "old.txt"), old_str="old", new_str="edited"
        )
        assert not executor(created).is_error
        assert not executor(edited).is_error
        log = disk.mount / "events.jsonl"  # the kernel's log: its fsync follows the answer
        log.write_text("tool_finished\n")
        fsync(log)
        disk.freeze()
        disk.cut("lose", "lose", seed=1)
    kept = tmp_path / "backing" / "ws"
    assert sorted(p.name for p in kept.iterdir()) == ["new.txt", "old.txt"]
    assert (kept / "new.txt").read_text() == "new file\n"
    assert (kept / "old.txt").read_text() == "edited text\n"
