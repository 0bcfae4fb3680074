"""OpenHands' FileEditorExecutor with a directory view that stays inside the workspace.

OpenHands lists a directory two levels deep with `Path.is_dir()`, which follows symbolic links:
`read .` would list the contents of a linked `/etc`. Here a link is shown as a link (`name@`)
and never entered, and a name that is not UTF-8 is shown escaped (`bad\\xff.txt`). Imported
by the tool worker's setup only (OpenHands is slow to import).

OpenHands opens a file by its path for every read (size, type, encoding, lines, text), after
the file tools' no-follow check (workers/tool/files.py): a link swapped in between was
followed, a file grown since read whole. Here a call that reads an existing file holds it: its
bytes read once through `Confined` (no link followed, a regular file only), at most the cap
and one byte, and every read of that path in the call served from them (an `open` of ours in
OpenHands' editor and encoding modules; `validate_file` and `_is_decodable_text` overridden),
until the editor's own write (issue 32 item 3).

Each OpenHands FileEditor makes its own `/tmp/oh_editor_history_*` directory for `undo_edit`
and never removes it: every tool worker left two behind (4,000 of them in this machine's /tmp
after a few days of tests), holding copies of the person's files. Here the undo history lives
where the kernel says (`--editor-history`): its private runtime directory, removed when the
kernel closes the tool worker, or by the next kernel after a crash. Never the session
directory: the copies are unredacted (a key in a workspace file would be stored there).

A file the editor writes is on the disk before the tool answers: OpenHands writes a temp file
and renames it over the path, with no fsync, so a power cut could undo a write the person was
shown as done, or keep its name with none of its text. Here the temp file is fsynced before the
rename (a cut leaves the old text or the new, never an empty file) and the directory after it.
A shell command's own writes are its own affair (docs/DECISIONS.md "What the editor writes").

The temp file is made 0600 (`tempfile`); OpenHands gives an overwritten file's mode back to it,
a new file kept 0600 whatever the umask (issue 37). Here a new file gets what a new file of the
person's would: 0666 less the umask, the worker's being its kernel's on both spawn paths
(workers/pool/takeon.py); an overwritten or edited file keeps its mode and, where the worker may
give it (root, or a group it is in), its owner and group.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import openhands.tools.file_editor.editor as oh_editor
import openhands.tools.file_editor.utils.encoding as oh_encoding
from binaryornot.helpers import CHUNK_SIZE, has_binary_extension, is_binary_string
from openhands.tools.file_editor.editor import IMAGE_EXTENSIONS, FileEditor
from openhands.tools.file_editor.exceptions import FileValidationError, ToolError
from openhands.tools.file_editor.impl import FileEditorExecutor
from openhands.tools.file_editor.utils.encoding import BINARY_CONTROL_CHARS, TEXT_DECODE_CANDIDATES
from openhands.tools.file_editor.utils.history import FileHistoryManager

from jev_harness.workspace_fs import Confined, Refused
from protocol.text import clean

READS = ("view", "str_replace", "insert")  # the commands that read an existing file
_held = threading.local()  # .file: (path, bytes) of the call under way, read when it began


def _open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> IO[Any]:
    """`open` in OpenHands' editor and encoding modules: the file of the call under way, read
    for it through the checked descriptor, is served from those bytes; anything else as
    `open` would (a write, another path)."""
    held = getattr(_held, "file", None)
    if held is None or "r" not in mode or any(c in mode for c in "wax+"):
        return builtins.open(file, mode, *args, **kwargs)
    path, data = held
    if not isinstance(file, (str, os.PathLike)) or os.fspath(file) != path:
        return builtins.open(file, mode, *args, **kwargs)
    if "b" in mode:
        return io.BytesIO(data)
    encoding = kwargs.get("encoding", args[1] if len(args) > 1 else None)
    errors, newline = kwargs.get("errors"), kwargs.get("newline")
    return io.TextIOWrapper(io.BytesIO(data), encoding=encoding, errors=errors, newline=newline)


for _module in (oh_editor, oh_encoding):  # their reads of a path, by the name `open`
    _module.open = _open  # type: ignore[attr-defined]


class WorkspaceEditor(FileEditor):
    """FileEditor whose directory view never follows a symbolic link, whose reads of a file
    are of the bytes read through the checked descriptor (at most its cap and one byte), and
    whose writes are on the disk before it answers (the module docstring)."""

    def __init__(self, workspace_root: str, max_file_size_mb: int | None = None) -> None:
        super().__init__(workspace_root=workspace_root, max_file_size_mb=max_file_size_mb)
        self.root = Path(os.path.realpath(workspace_root))

    def __call__(self, *, command: Any, path: str, **kwargs: Any) -> Any:
        """OpenHands' call, with an existing file that a command reads held for it: its bytes
        read once, through a descriptor opened without following below the workspace (the
        file tools' check, `Confined`), at most the cap and one byte; every read of it in
        this call (size, type, encoding, lines, text, an image) is of those bytes. A link or
        a special file swapped in after the kernel's check is refused, never followed, and a
        file grown past the cap since is refused, not read whole."""
        _held.file = self._hold(command, path)
        try:
            return super().__call__(command=command, path=path, **kwargs)
        finally:
            _held.file = None

    def _hold(self, command: str, path: str) -> tuple[str, bytes] | None:
        where = Path(path)
        try:
            is_dir = stat.S_ISDIR(os.lstat(where).st_mode)  # a link to one is held, so refused
        except OSError:
            return None  # a new file (create: nothing read); a missing one OpenHands names
        if command not in READS or is_dir:
            return None  # a directory: its own view, which follows no link
        try:
            parts = tuple(os.fsencode(p) for p in where.relative_to(self.root).parts)
        except ValueError:
            return None  # outside the workspace: OpenHands' own validation says so
        try:
            data, _, _ = Confined(self.root).read_bytes(parts, self._max_file_size + 1)
        except Refused as exc:
            raise ToolError(f"{path} changed since it was checked and is refused: {exc}") from None
        except OSError as exc:
            raise ToolError(f"could not read {path}: {exc.strerror or exc}") from None
        if len(data) > self._max_file_size:
            cap = self._max_file_size // (1024 * 1024)
            raise FileValidationError(
                path=path,
                reason=f"File is too large (over {cap}MB). Maximum allowed size is {cap}MB.",
            )
        return os.fspath(where), data

    def validate_file(self, path: Path) -> None:
        """OpenHands' checks (size, binary or text), of the held bytes when the file is held."""
        held = getattr(_held, "file", None)
        if held is None or held[0] != os.fspath(path):
            return super().validate_file(path)
        data = held[1]  # within the cap: `_hold` refused more
        if path.suffix.lower() in IMAGE_EXTENSIONS:
            return None
        if has_binary_extension(str(path)) or is_binary_string(data[:CHUNK_SIZE]):
            if self._is_decodable_text(path):
                return None
            raise FileValidationError(
                path=str(path),
                reason="File appears to be binary and this file type cannot be read or edited "
                "by this tool.",
            )
        return None

    def _is_decodable_text(self, path: Path) -> bool:
        """OpenHands' test (does some encoding decode it to text without control bytes?), of
        the held bytes when the file is held (OpenHands reads the whole path for it)."""
        held = getattr(_held, "file", None)
        if held is None or held[0] != os.fspath(path):
            return super()._is_decodable_text(path)
        manager = self._encoding_manager
        for candidate in dict.fromkeys(
            (manager.get_encoding(path), manager.default_encoding, *TEXT_DECODE_CANDIDATES)
        ):
            try:
                text = held[1].decode(candidate)
            except (UnicodeDecodeError, LookupError):
                continue
            if BINARY_CONTROL_CHARS.search(text) is None:
                return True
        return False

    def view(self, path: Path, view_range: list[int] | None = None) -> Any:
        """OpenHands' view, after its size check for images too: it read a `.png` whole,
        whatever its size, before any check (issue 32 item 3: a file tool reads at most its
        cap and one byte); a file over the cap is refused unread, as any other file is."""
        if path.suffix.lower() in IMAGE_EXTENSIONS and not path.is_dir():
            self.validate_file(path)
        return super().view(path, view_range)

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

    def _atomic_write(self, path: Path, file_text: str, encoding: str) -> None:
        """OpenHands' temp file and rename (its text fsynced first: `_temp_file`), then the
        directory fsynced: the new name survives a power cut too."""
        super()._atomic_write(path, file_text, encoding)
        _fsync(path.parent, os.O_DIRECTORY)  # the directory the rename went to, link or not
        held = getattr(_held, "file", None)
        if held is not None and held[0] == os.fspath(path):
            _held.file = None  # our own new text: what follows (the snippet) reads it

    @contextlib.contextmanager
    def _temp_file(self, path: Path, file_text: str, encoding: str) -> Iterator[Path]:
        with super()._temp_file(path, file_text, encoding) as temp:
            _fsync(temp, os.O_NOFOLLOW)  # before the rename: the path then names the whole new text
            _take_on(temp, path)  # then OpenHands gives an existing file's mode back
            yield temp


def _take_on(temp: Path, path: Path) -> None:
    """The temp file's mode and owner as `path`'s would be: a new file's 0666 less the umask;
    an existing file's owner and group where we may give them (OpenHands copies its mode)."""
    try:
        old = os.stat(path)
    except FileNotFoundError:
        os.chmod(temp, 0o666 & ~current_umask())
        return
    mine = os.stat(temp)
    if (old.st_uid, old.st_gid) != (mine.st_uid, mine.st_gid):
        try:
            os.chown(temp, old.st_uid, old.st_gid)
        except PermissionError:  # not root: the group, if it is one of ours; else ours
            with contextlib.suppress(PermissionError):
                os.chown(temp, -1, old.st_gid)


def current_umask() -> int:
    """This process's umask, read without changing it (/proc: another thread may be creating
    a file meanwhile); where /proc has no Umask line, set and restored at once."""
    with (
        contextlib.suppress(OSError, StopIteration, ValueError),
        open("/proc/self/status", encoding="ascii") as status,
    ):
        return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


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


def _fsync(path: Path, flags: int = 0) -> None:
    """fsync path; a filesystem that cannot sync it (EINVAL, ENOTSUP) is left as it is, and
    any other failure is the write's (OpenHands reports it as a ToolError naming the path)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def _drop_history_dir(editor: FileEditor) -> None:
    """Remove the (still empty) temporary history directory a new FileEditor made."""
    with contextlib.suppress(OSError, AttributeError):
        os.rmdir(editor._history_manager.cache.directory)  # rmdir: never a non-empty one
