"""`jev-harness check-task`: a static check of a task script, in a throwaway subprocess.

The parent never imports the script. The probe (`python -B -m jev_harness.check`) first arms
an audit hook that refuses every socket, every process spawn and every file write, then
executes the script's bytes, checks `workflow = TaskScript(build)` with a one-argument build
and, given inputs, that `build(inputs)` returns a well-formed task. It prints one JSON object
`{"ok", "problems", "tools", "labels"}`; whatever the script prints goes to stderr.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROBE_TIMEOUT_S = 60.0
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


def probe(path: str, inputs: Any) -> dict[str, Any]:
    """The check itself (runs inside the probe process, with the guards armed)."""
    from jev_harness.model import TaskScript
    from jev_harness.task import Task

    result: dict[str, Any] = {"ok": False, "problems": [], "tools": [], "labels": []}
    problems: list[str] = result["problems"]
    try:
        data = Path(path).read_bytes()
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


def check_task(path: str, inputs: Any) -> dict[str, Any]:
    """Run the probe in a throwaway subprocess; its JSON verdict, or a problem naming why not."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_ACCESS_KEY"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-B", "-m", "jev_harness.check", path]
    try:
        done = subprocess.run(
            argv,
            input=json.dumps(inputs).encode(),
            capture_output=True,
            env=env,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _failed(f"the script did not finish loading within {PROBE_TIMEOUT_S:g} s")
    from kernel.display import terminal_safe
    from kernel.store.redact import Redactor, environment_secrets

    # The probe has no key, but what it prints leaves jmp: redacted and inert like the rest.
    said = Redactor(environment_secrets()).text(done.stderr.decode("utf-8", "replace"))
    sys.stderr.write(terminal_safe(said))
    try:
        verdict = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return _failed(f"the check process ended with status {done.returncode} and no verdict")
    return verdict if isinstance(verdict, dict) else _failed("the check gave no verdict")


def _failed(problem: str) -> dict[str, Any]:
    return {"ok": False, "problems": [problem], "tools": [], "labels": []}


def main() -> None:
    """The probe's entry: FILE as argv[1], inputs (JSON, null for none) on stdin."""
    sys.dont_write_bytecode = True
    inputs = json.loads(sys.stdin.read() or "null")
    out = sys.stdout
    sys.stdout = sys.stderr  # the script's prints must not mix with the verdict
    import jev_harness.model  # noqa: F401  (loaded before the guards: reading code is fine)

    _block_sockets()
    verdict = probe(sys.argv[1], inputs)
    out.write(json.dumps(verdict, ensure_ascii=False, default=str) + "\n")
    out.flush()
    os._exit(0)  # no atexit hook of the script runs


if __name__ == "__main__":
    main()
