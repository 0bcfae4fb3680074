"""What a file tool may open: a regular file or a directory, found without following (issue 32).

A path is resolved once, by `binding.confine` (symbolic links followed, as the person's own
tools would, and the result must lie inside the workspace). Before the editor touches it,
`refusal` opens every component of that resolved path below the workspace without following
(O_NOFOLLOW | O_NONBLOCK, descriptor by descriptor: the jev-harness workspace toolkit's
`Confined`, the one home of this check) and looks at the last one through its descriptor:

- a FIFO, a character or block device, a socket: refused, its type named, never read (a FIFO
  would block the call forever, `/dev/zero` would be read until memory ran out);
- a symbolic link at any level (swapped in since the path was resolved): refused, never
  followed;
- a path that does not exist yet: left to the editor (`write` creates it; read and edit say
  it does not exist).

The editor then reads the file through a descriptor opened the same way (workers/tool/editor.py
`WorkspaceEditor`: once per call, at most the cap and one byte), never the path again; a hung
filesystem is bounded by the file tools' time limit (the kernel's `FILE_TOOL_S`).
"""

from __future__ import annotations

import os
from pathlib import Path

from jev_harness.workspace_fs import Confined, Refused


def refusal(tool: str, path: str, workspace: Path) -> str | None:
    """Why `tool` must not open `path` (resolved, inside `workspace`), or None when it may."""
    if not os.path.lexists(path):
        return None
    parts = tuple(os.fsencode(p) for p in Path(path).relative_to(workspace).parts)
    try:
        Confined(workspace).inspect(parts)
    except FileNotFoundError:
        return None  # gone since: the editor says so
    except Refused as exc:
        return (
            f"{tool} refused {path!r}: {exc}. The file tools open only regular files and "
            "directories (never a FIFO, device, socket or symbolic link); use bash for others."
        )
    except OSError as exc:
        return f"{tool} could not open {path!r}: {exc.strerror or exc}"
    return None
