"""Are two processes in the same Landlock domain? The probe both the kernel and its pool run.

Landlock shows a domain nowhere (no /proc field), but it scopes ptrace: a process in a domain
may not ptrace-read (PTRACE_MODE_READ_FSCREDS, which `/proc/PID/exe`, `cwd` and `root` need)
a process outside that domain or its nested ones, whatever its capabilities; a process in no
domain may read every domain's. (`/proc/PID/environ`, `maps` and `auxv` are readable across
domains on Linux 6.18: they prove nothing.) So A can read B's exe iff B's domain is A's or
nested in it, and two processes that can read each other's are in the same domain. Every
`landlock_restrict_self` makes a new domain: two runs sandboxed separately with equal rules
are different domains.

A jmp kernel holds keys and a pool serves forks, so both are non-dumpable, and a non-root
reader is refused by that alone. Each side therefore shows a `Probe`: a tiny dumpable child
(`cat` reading a pipe, exec'd with an empty environment, so it holds nothing), in the domain
and root directory of its parent, which the other side reads. The pool keeps one for its
lifetime (its pid is in the pool's title, `TITLE_PREFIX`), working in a directory removed at
once, so reachable only through `/proc/PID/cwd`; the kernel starts one per request. The
kernel opens the pool probe's cwd before it sends a byte and sends that descriptor along, the
proof that it could (`open_cwd`); the pool reads the kernel probe's exe before it forks
(`inspect`). Each read is by the process whose domain counts, and the pool checks both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Callable

TITLE_PREFIX = "probe="  # the pool's title: TITLE DIR VIEW probe=PID
_CATS = ("/usr/bin/cat", "/bin/cat")


class Probe:
    """A dumpable child in our Landlock domain (and chroot), alive until `close()` or until
    we exit (its stdin is a pipe only we hold). With `hidden_cwd` (the pool's) it works in a
    directory removed at once (`cwd_id` its identity, held open so it is never reused).
    Raises OSError when it cannot start."""

    def __init__(self, hidden_cwd: bool = False) -> None:
        exe = next((path for path in _CATS if os.access(path, os.X_OK)), _CATS[0])
        self.cwd_id: tuple[int, int] | None = None
        self._cwd_fd: int | None = None
        read_end, self._hold = os.pipe()
        actions = [
            (os.POSIX_SPAWN_DUP2, read_end, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        here = os.open(".", os.O_PATH | os.O_CLOEXEC) if hidden_cwd else None
        try:
            if hidden_cwd:  # single-threaded callers only (the pool, before it serves)
                where = tempfile.mkdtemp(prefix="jmp-probe-")
                self._cwd_fd = os.open(where, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                st = os.fstat(self._cwd_fd)
                self.cwd_id = (st.st_dev, st.st_ino)
                os.chdir(where)
                os.rmdir(where)
            # posix_spawn returns once the exec has succeeded (vfork): the probe is dumpable now
            self.pid = os.posix_spawn(exe, [exe], {}, file_actions=actions, setsigdef=_SIGNALS)
        except OSError:
            os.close(self._hold)
            raise
        finally:
            os.close(read_end)
            if here is not None:
                os.fchdir(here)
                os.close(here)
        self.closed = False

    def close(self) -> None:
        """Kill and reap the probe. Idempotent."""
        if self.closed:
            return
        self.closed = True
        os.close(self._hold)
        if self._cwd_fd is not None:
            os.close(self._cwd_fd)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)  # our unreaped child: the pid is still its own
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def proves(self, fd: int) -> bool:
        """Is `fd` our hidden cwd (so its sender could ptrace-read this probe)?"""
        st = os.fstat(fd)
        return self.cwd_id is not None and (st.st_dev, st.st_ino) == self.cwd_id


_SIGNALS = (signal.SIGPIPE, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def inspect(pid: int, parent: int) -> str:
    """'' when we may ptrace-read process `pid`, a live probe child of `parent` (so our
    Landlock domain holds its domain); else why not: another domain, or a probe that is gone
    or not `parent`'s (then nothing can be told)."""
    return _through(pid, parent, lambda: os.readlink(f"/proc/{pid}/exe"))[0]


def open_cwd(pid: int, parent: int) -> tuple[str, int | None]:
    """As `inspect`, by opening the probe's working directory (O_PATH): ('', the fd) or
    (why not, None). The fd is the proof a pool checks (`Probe.proves`)."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    problem, fd = _through(pid, parent, lambda: os.open(f"/proc/{pid}/cwd", flags))
    return problem, fd if isinstance(fd, int) else None


def _through[T](pid: int, parent: int, read: Callable[[], T]) -> tuple[str, T | None]:
    gone = f"its Landlock probe ({pid}) is gone: the domain cannot be told"
    try:
        state, ppid = _state(pid)
        if ppid != parent:
            return f"its Landlock probe ({pid}) is not its child", None
        if state in (b"Z", b"X"):
            return gone, None
        return "", read()
    except PermissionError:
        return "it is in another Landlock domain (its probe cannot be inspected from here)", None
    except (OSError, IndexError, ValueError):
        return gone, None


def _state(pid: int) -> tuple[bytes, int]:
    """(state letter, ppid) of process `pid`, from /proc/PID/stat (readable for any)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return fields[0], int(fields[1])


def probe_of_title(title: list[str]) -> int | None:
    """The probe pid in a pool's title (its fourth part), None when there is none."""
    if len(title) < 4 or not title[3].startswith(TITLE_PREFIX):
        return None
    number = title[3].removeprefix(TITLE_PREFIX)
    return int(number) if number.isdigit() else None
