"""Which directories may be a session's workspace: checked before any session exists.

The bash tool is an unconfined shell and the file tools write where the model says inside the
workspace, so a workspace must be a project directory, not the system. Refused: the root
directory, the top-level system directories themselves (their subdirectories, e.g.
/usr/src/app or /var/www/site, stay usable), anything inside the pseudo file systems /proc and
/sys, and a path that is not UTF-8 (the log records it as text). See docs/DECISIONS.md.
"""

from __future__ import annotations

from pathlib import Path

from kernel.errors import UsageError

SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32"}
    | {"/proc", "/run", "/sbin", "/sys", "/usr", "/var"}
)
PSEUDO_ROOTS = ("/proc/", "/sys/")


def utf8_problem(text: str) -> str:
    """'' when text is valid UTF-8 text, else what is wrong (an undecodable byte, a surrogate)."""
    try:
        text.encode("utf-8")
        return ""
    except UnicodeEncodeError as exc:
        start = exc.start
    bad = text[start]
    if "\udc80" <= bad <= "\udcff":  # an undecodable byte kept by surrogateescape
        offset = len(text[:start].encode("utf-8", "surrogateescape"))
        return f"invalid UTF-8 byte 0x{ord(bad) - 0xDC00:02x} at byte offset {offset}"
    return f"a lone surrogate U+{ord(bad):04X} at character {start}"


def check_workspace(path: Path | str) -> Path:
    """The resolved workspace, or UsageError naming why this directory cannot be one."""
    if str(path) == "":
        raise UsageError("the workspace path is empty: give a directory (`.` for this one)")
    problem = utf8_problem(str(path))
    if problem:
        raise UsageError(f"the workspace path is not valid UTF-8 ({problem})")
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_dir():
        raise UsageError(f"workspace {resolved} does not exist or is not a directory")
    name = str(resolved)
    if name in SYSTEM_DIRS or name.startswith(PSEUDO_ROOTS):
        raise UsageError(
            f"workspace {name} is a system directory: jmp's tools would run and write there "
            "unconfined; choose a project directory"
        )
    return resolved
