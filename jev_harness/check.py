"""The check-task probe: `python -B -P -m jev_harness.check FILE WORKDIR KEY_FD VERDICT_FD`.

Started by `jev_harness.cli.check_launch` (the parent never imports the script). The probe reads
its verdict key from KEY_FD and the inputs from stdin, then runs the check in an OS-confined
child (jev_harness/sandbox.py: namespaces, a read-only view, no sockets, no capability) when
the machine allows it, else itself, unconfined. Either way an audit hook first refuses the
sockets, process spawns and file writes Python sees (clear messages; the confinement is what
holds against code Python does not see). Then it executes the script's bytes, checks
`workflow = TaskScript(build)` with a one-argument build and, given inputs, that
`build(inputs)` returns a well-formed task, and writes `{"confined", "why", "verdict"}` with
its HMAC (the key) on VERDICT_FD, a pipe the script was never told about; whatever the
script prints goes to stderr. A script that writes a verdict of its own (on fd 1, or on every
fd it holds) cannot sign it: the parent then reports that no authentic verdict came.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import json
import os
import select
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 60.0  # the check's own deadline; the parent waits a little longer
TRACE_FRAMES = 4  # the innermost frames of a script's traceback named in a problem
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
        problems.append(f"the script failed at import: {traceback_summary(exc)}")
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
        problems.append(f"build(inputs) raised: {traceback_summary(exc)}")
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
        problems.append(f"the built task cannot be observed: {traceback_summary(exc)}")
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


def main() -> None:
    """The probe's entry (see the module docstring); never returns."""
    sys.dont_write_bytecode = True
    path, workdir, key_fd, verdict_fd = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with os.fdopen(key_fd, "rb") as key_pipe:
        mac = hmac.new(key_pipe.read(64), digestmod="sha256")  # the key itself is not kept
    os.chdir(workdir)
    inputs = json.loads(sys.stdin.read() or "null")
    try:
        data: bytes | BaseException = Path(path).read_bytes()  # before any confinement
    except OSError as exc:
        data = exc
    # Loaded before the guards and the confinement (reading our code is fine).
    import jev_harness.model
    import jev_harness.task  # noqa: F401

    why = _confined_run(data, path, inputs, workdir, mac, verdict_fd)
    _run(data, path, inputs, mac, verdict_fd, why)  # unconfined: why says why


def _confined_run(
    data: bytes | BaseException, path: str, inputs: Any, workdir: str, mac: Any, verdict_fd: int
) -> str:
    """Run the check in an OS-confined child and return, or say why it could not be confined
    (nothing of the script has run then). A confined run ends this process (os._exit)."""
    from jev_harness import sandbox

    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # the namespaces' parent; its child is their init, the confined check
        os.close(ready_r)
        try:
            sandbox.enter_namespaces()
            if os.fork() == 0:
                _confined_init(data, path, inputs, workdir, mac, verdict_fd, ready_w)
            os.close(ready_w)
            os.wait()
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(ready_w, f"no {exc}\n".encode())
        finally:
            os._exit(0)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        said = ready.readline().decode("utf-8", "replace").strip()
    if said != "ok":
        os.waitpid(child, 0)
        return said.removeprefix("no ").strip() or "the confined probe could not start"
    os.close(verdict_fd)  # the confined child writes the verdict; we only keep time
    _wait_or_kill(child, PROBE_TIMEOUT_S)
    os._exit(0)


def _confined_init(
    data: bytes | BaseException,
    path: str,
    inputs: Any,
    workdir: str,
    mac: Any,
    verdict_fd: int,
    ready_w: int,
) -> None:
    """The PID namespace's init: confine, say "ok", run the check; never returns. Nothing of
    the script runs unless the confinement is complete."""
    from jev_harness import sandbox

    try:
        sandbox.confine(_view(path, workdir, inputs), os.path.realpath(workdir))
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.write(ready_w, f"no {exc}\n".encode())
        os._exit(0)
    os.write(ready_w, b"ok\n")
    os.close(ready_w)  # nothing the script does can take "ok" back
    _run(data, path, inputs, mac, verdict_fd, "")


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


def _wait_or_kill(pid: int, timeout_s: float) -> None:
    """Wait for `pid`; past the deadline kill it (its init then dies: a parent-death signal,
    which the confined script cannot clear), and reap it either way."""
    with contextlib.suppress(OSError):
        pidfd = os.pidfd_open(pid)
        if not select.select([pidfd], [], [], timeout_s)[0]:
            os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _run(
    data: bytes | BaseException,
    path: str,
    inputs: Any,
    mac: Any,
    verdict_fd: int,
    why: str | None,
) -> None:
    """The check, then the signed verdict on verdict_fd; never returns. `why`: "" when
    confined by the OS, else why not."""
    sys.stdout = sys.stderr  # the script's prints go to stderr
    _block_sockets()
    verdict = probe(path, inputs, data)
    payload = json.dumps(
        {"confined": why == "", "why": why or None, "verdict": verdict},
        ensure_ascii=False,
        default=str,
    ).encode()
    signed = mac.copy()
    signed.update(payload)
    with contextlib.suppress(OSError):
        os.write(verdict_fd, payload + b"\n" + signed.hexdigest().encode() + b"\n")
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(0)  # no atexit hook of the script runs


if __name__ == "__main__":
    main()
