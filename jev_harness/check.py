"""The check-task probe: `python -B -P -m jev_harness.check FILE WORKDIR STATUS GO VERDICT` (fds).

Started by `jev_harness.cli.check_launch` (the parent never imports the script, nor runs any of
its code). The probe reads the inputs, the limits and the script's bytes (as the parent read
them) from stdin, then runs the check in an OS-confined child
(jev_harness/sandbox.py: namespaces, a read-only view, no sockets, no new process, no
capability) when the machine allows it, else itself, unconfined. Before any of the script's
code runs, the probe's own code writes one line on STATUS_FD and closes it everywhere:
`confined PID` (the confined child's pid, which the parent then inspects in /proc and lets go
on by a byte on GO_FD) or `unconfined WHY` (the probe itself, guarded by `sandbox.guard`,
which the parent inspects as well, warns on stderr, and only then lets go); so `confined` is
the parent's finding, never the script's word. The limits of jev_harness/limits.py are set,
and an audit hook refuses the sockets, process spawns and file writes Python sees. Then it
executes the script's bytes, checks `workflow = TaskScript(build)` with a one-argument build
and, given inputs, that `build(inputs)` returns a well-formed task, and writes its finding
(JSON) on VERDICT_FD.
That is data from a process the script ran in: the parent decodes it strictly (the shape and
bounds of its `Finding` type, nothing else) and builds the verdict itself; whatever the script
prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import select
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from jev_harness import limits
from protocol.limits import ScriptLimits

PROBE_TIMEOUT_S = 60.0  # the check's own deadline; the parent waits a little longer
TRACE_FRAMES = 4  # the innermost frames of a script's traceback named in a problem
MAX_ITEMS = 1024  # tools, labels, problems or parameters in a finding
MAX_TEXT = 8192  # characters of one string in a finding
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_REFUSED = (
    "socket.",  # __new__, connect, bind, sendto, getaddrinfo, gethostbyname, ...
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.mkdir",
    "os.rename",
    "os.remove",
    "os.rmdir",
    "os.symlink",
    "os.link",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "os.utime",
    "shutil.",
    "urllib.Request",
    "ctypes.",
    "sqlite3.connect",
)


class Refused(RuntimeError):
    """check-task is static: the script tried the network, a process or a write."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        mode, flags = args[1], args[2]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            raise Refused(f"check-task is static: writing {args[0]!r} is refused")
        return
    if event.startswith("ctypes.") and threading.get_ident() in limits.watchdog_ident:
        return  # the CPU watchdog's own call (jev_harness/limits.py)
    if event.startswith(_REFUSED):
        raise Refused(f"check-task is static: {event} is refused")


def _block_sockets() -> None:
    import socket

    class NoSocket(socket.socket):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise Refused("check-task is static: sockets are refused")

    socket.socket = NoSocket  # type: ignore[misc]
    sys.addaudithook(_audit)


def probe(path: str, inputs: Any, data: bytes | BaseException) -> dict[str, Any]:
    """The check itself of the script's bytes `data` (or why they could not be read), inside
    the probe process, with the guards armed."""
    from jev_harness.model import TaskScript
    from jev_harness.task import Task

    result: dict[str, Any] = {"ok": False, "problems": [], "tools": [], "labels": []}
    problems: list[str] = result["problems"]
    try:
        if isinstance(data, BaseException):
            raise data
        module: dict[str, Any] = {"__name__": "jev_task_script", "__file__": path}
        exec(compile(data, path, "exec", dont_inherit=True), module)
    except BaseException as exc:
        problems.append(f"the script failed at import: {failure(exc)}")
        return result
    workflow = module.get("workflow")
    if not isinstance(workflow, TaskScript):
        problems.append("the script defines no `workflow = TaskScript(build)`")
        return result
    if not _one_argument(workflow.build):
        problems.append("TaskScript(build): build must take exactly one argument (inputs)")
    if inputs is None or problems:
        result["ok"] = not problems
        return result
    try:
        task = workflow.build(inputs)
    except BaseException as exc:
        problems.append(f"build(inputs) raised: {failure(exc)}")
        return result
    if not isinstance(task, Task):
        problems.append(f"build(inputs) returned {type(task).__name__}, not a Task")
        return result
    result["tools"] = [t.describe() for t in task.tools.values()]
    result["labels"] = list(getattr(task, "labels", None) or [])
    if not task.tools:
        problems.append("the task registers no tool")
    try:  # what a run asks first: the offer and the observation (reads only, no capture)
        task.offered_tools()
        task.observe()
    except BaseException as exc:
        problems.append(f"the built task cannot be observed: {failure(exc)}")
    try:
        task.close()
    except Exception as exc:
        problems.append(f"closing the task's toolkits failed: {type(exc).__name__}: {exc}")
    result["ok"] = not problems
    return result


def traceback_summary(exc: BaseException) -> str:
    """`Class: message` and the innermost frames, one line each (never the locals)."""
    frames = traceback.extract_tb(exc.__traceback__)[-TRACE_FRAMES:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return f"{head} (at {where})" if where else head


def _one_argument(build: Any) -> bool:
    try:
        params = list(inspect.signature(build).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty and p.kind != p.VAR_KEYWORD]
    return len(positional) >= 1 and len(required) <= 1


def failure(exc: BaseException) -> str:
    """A script's failure as one line: the limit it hit first, when it hit one."""
    limit = limits.named(exc)
    summary = traceback_summary(exc)
    return f"it hit {limit}: {summary}" if limit else summary


def main() -> None:
    """The probe's entry (see the module docstring); never returns."""
    sys.dont_write_bytecode = True
    path, workdir = sys.argv[1], sys.argv[2]
    status_fd, go_fd, verdict_fd = (int(a) for a in sys.argv[3:6])
    os.chdir(workdir)
    sent = json.loads(sys.stdin.read() or "{}")  # {"inputs", "limits"}
    inputs, bounds = sent.get("inputs"), ScriptLimits.from_dict(sent.get("limits") or {})
    data: bytes | BaseException
    if isinstance(sent.get("source"), str):  # the bytes the parent read and parsed
        data = sent["source"].encode("latin-1")
    else:
        try:
            data = Path(path).read_bytes()  # before any confinement
        except OSError as exc:
            data = exc
    # Loaded before the guards and the confinement (reading our code is fine).
    import jev_harness.model
    import jev_harness.task  # noqa: F401

    why = _confined_run(data, path, inputs, workdir, (status_fd, go_fd, verdict_fd), bounds)
    # Unconfined: guarded (jev_harness/sandbox.py `guard`: nothing of ours reached, above all
    # not check-task) or, failing that, check-task finds no seccomp filter in /proc and runs
    # nothing. Either way the status line, then check-task's go (it has warned by then).
    from jev_harness import sandbox

    try:
        sandbox.guard()
    except (sandbox.Unconfined, OSError) as exc:
        why = f"{why}; not guarded either: {exc}"
    _say(status_fd, f"unconfined {why}")  # before any of the script's code, in this process
    go = b""
    with contextlib.suppress(OSError):
        go = os.read(go_fd, 1)
    os.close(go_fd)
    if go != b"g":  # check-task found the guard wanting, or is gone
        os._exit(0)
    _run(data, path, inputs, verdict_fd, bounds)


def _say(status_fd: int, line: str) -> None:
    """The one status line (see the module docstring), then the fd closed."""
    with contextlib.suppress(OSError):
        os.write(status_fd, (" ".join(line.split()) + "\n").encode())
    os.close(status_fd)


def _confined_run(
    data: bytes | BaseException,
    path: str,
    inputs: Any,
    workdir: str,
    fds: tuple[int, int, int],
    bounds: ScriptLimits,
) -> str:
    """Run the check in an OS-confined child and exit, or say why it could not be confined
    (nothing of the script has run then)."""
    from jev_harness import sandbox

    status_fd, go_fd, verdict_fd = fds
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # the namespaces' parent; its child is their init, the confined check
        os.close(ready_r)
        os.close(status_fd)
        try:
            sandbox.enter_namespaces()
            init = os.fork()
            if init == 0:
                _confined_init(data, path, inputs, workdir, (go_fd, verdict_fd), ready_w, bounds)
            os.write(ready_w, f"pid {init}\n".encode())
            os.close(ready_w)
            os.close(go_fd)
            os.close(verdict_fd)
            code = os.waitstatus_to_exitcode(os.waitpid(init, 0)[1])
            os._exit(128 - code if code < 0 else code)  # the init's end, e.g. 152: SIGXCPU
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(ready_w, f"no {exc}\n".encode())
        finally:
            os._exit(0)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:  # to its end: both writers close it first
        said = dict(
            line.decode("utf-8", "replace").strip().partition(" ")[::2]
            for line in ready.read(65536).splitlines()
        )
    if said.get("ok") is None or not said.get("pid", "").isdigit():
        os.waitpid(child, 0)
        return said.get("no") or "the confined probe could not start"
    _say(status_fd, f"confined {said['pid']}")
    os.close(go_fd)
    os.close(verdict_fd)  # the confined child writes the verdict; we only keep time
    os._exit(_wait_or_kill(child, PROBE_TIMEOUT_S))


def _confined_init(
    data: bytes | BaseException,
    path: str,
    inputs: Any,
    workdir: str,
    fds: tuple[int, int],
    ready_w: int,
    bounds: ScriptLimits,
) -> None:
    """The PID namespace's init: confine, say "ok", wait for the parent's go, run the check;
    never returns. Nothing of the script runs unless the confinement is complete and the
    parent has seen it."""
    from jev_harness import sandbox

    go_fd, verdict_fd = fds
    try:
        sandbox.confine(_view(path, workdir, inputs), os.path.realpath(workdir))
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.write(ready_w, f"no {exc}\n".encode())
        os._exit(0)
    os.write(ready_w, b"ok \n")
    os.close(ready_w)  # nothing the script does can take "ok" back
    go = b""
    with contextlib.suppress(OSError):
        go = os.read(go_fd, 1)
    os.close(go_fd)
    if go != b"g":  # the parent found the confinement wanting, or is gone
        os._exit(0)
    _run(data, path, inputs, verdict_fd, bounds)


def _view(path: str, workdir: str, inputs: Any) -> list[str]:
    """What the confined check may read besides Python itself: the working directory, the
    script's directory, and every existing absolute path named in the inputs."""
    found = [workdir, os.path.dirname(path)]
    stack = [inputs]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and item.startswith("/") and os.path.exists(item):
            found.append(item)
    return found


def _wait_or_kill(pid: int, timeout_s: float) -> int:
    """Wait for `pid`; past the deadline kill it (its init then dies: a parent-death signal,
    which the confined script cannot clear), and reap it either way; its exit code."""
    with contextlib.suppress(OSError):
        pidfd = os.pidfd_open(pid)
        if not select.select([pidfd], [], [], timeout_s)[0]:
            os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
    try:
        return max(0, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    except ChildProcessError:
        return 0


def _run(
    data: bytes | BaseException, path: str, inputs: Any, verdict_fd: int, bounds: ScriptLimits
) -> None:
    """The check, then the finding on verdict_fd; never returns."""
    sys.stdout = sys.stderr  # the script's prints go to stderr
    limits.apply(bounds, PROBE_TIMEOUT_S, threading.main_thread())
    limits.busy.set()  # from here on the script's code may run
    _block_sockets()
    verdict = probe(path, inputs, data)
    finding = {
        "problems": [str(p)[:MAX_TEXT] for p in verdict["problems"]][:MAX_ITEMS],
        "tools": [_shape(t) for t in verdict["tools"]][:MAX_ITEMS],
        "labels": [str(label)[:MAX_TEXT] for label in verdict["labels"]][:MAX_ITEMS],
    }
    with contextlib.suppress(Exception):
        os.write(verdict_fd, json.dumps(finding, ensure_ascii=False).encode())
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(0)  # no atexit hook of the script runs


def _shape(tool: dict[str, Any]) -> dict[str, Any]:
    def text(value: Any) -> str:
        return str(value)[:MAX_TEXT]

    return {
        "name": text(tool["name"]),
        "description": text(tool["description"]),
        "effect": text(tool["effect"]),
        "parameters": [
            {
                "name": text(p["name"]),
                "description": text(p["description"]),
                "selection": text(p["selection"]),
                "depends_on": [text(d) for d in p["depends_on"]][:MAX_ITEMS],
            }
            for p in tool["parameters"]
        ][:MAX_ITEMS],
    }


if __name__ == "__main__":
    main()
