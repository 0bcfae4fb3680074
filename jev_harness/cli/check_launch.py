"""`jev-harness check-task`'s side of the probe: start it, decide `confined`, build the verdict.

This process never runs a byte of the script. The probe (`jev_harness.check`) says on a pipe of
its own, before the script runs, whether it is confined; for `confined PID` this process reads
/proc/PID itself (a PID namespace of its own, a user namespace that is not the host's, seccomp,
no_new_privs, no capability) and only then lets the probe go on. The probe's finding comes as a
JSON `Finding` on a third pipe: data from a process the script ran in, so it is decoded
strictly (the type's fields and bounds, nothing else) and the verdict is built here, `ok`
included. What a hostile script can still make check-task say is its own tools, labels and
problems (docs/JEV-HARNESS.md); not `confined`, not the shape, not the unconfined warning.
stdout and stderr are one pipe whose bytes (at most MAX_SAID of them) are shown redacted and
inert.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import Annotated, Any

import msgspec

from host.spawn import SAFE_FLAGS, SPAWN_CWD, child_pythonpath
from jev_harness.check import MAX_ITEMS, MAX_TEXT, PROBE_TIMEOUT_S
from protocol.limits import ScriptLimits

MAX_SAID = 64 * 1024  # of the script's own output, shown on stderr
MAX_VERDICT = 4 * 1024 * 1024
MAX_SOURCE = 16 * 1024 * 1024  # a script larger than this is not parsed here (the probe says)
MAX_STATUS = 4096
GRACE_S = 5.0  # past the probe's own deadline, before we kill its process group
GUARDED = True  # `_confinement_wanting`'s check of an unconfined probe's guard
NO_WORKFLOW = "the script defines no `workflow = TaskScript(build)`"
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]


class ParameterShape(msgspec.Struct, forbid_unknown_fields=True):
    name: Text
    description: Text
    selection: Text
    depends_on: Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)]


class ToolShape(msgspec.Struct, forbid_unknown_fields=True):
    name: Text
    description: Text
    effect: Text
    parameters: Annotated[list[ParameterShape], msgspec.Meta(max_length=MAX_ITEMS)]


class Finding(msgspec.Struct, forbid_unknown_fields=True):
    """What the probe found, as this process accepts it: nothing but these fields and
    bounds (`ok` and `confined` are decided here)."""

    problems: Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)]
    tools: Annotated[list[ToolShape], msgspec.Meta(max_length=MAX_ITEMS)]
    labels: Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)]


UNCONFINED = (
    "jev-harness: check-task: the script ran without OS confinement ({why}): its import-time "
    "code (and build) ran with your rights; do not check a script you do not trust here\n"
)


def check_task(path: str, inputs: Any, limits: ScriptLimits) -> dict[str, Any]:
    """Run the probe in a throwaway subprocess; the verdict built from its finding, or a
    problem naming why there is none."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_ACCESS_KEY"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = child_pythonpath(env)
    try:
        workdir = os.getcwd()
    except OSError:
        return _failed("the working directory is gone")
    source = _read_source(path)
    static = _static_problems(path, source)
    status_r, status_w = os.pipe()
    go_r, go_w = os.pipe()
    verdict_r, verdict_w = os.pipe()
    # Started in SPAWN_CWD with -P (nothing of the launch dir importable); it enters `workdir`
    # once sys.path is settled, so the script's relative paths mean what they mean here.
    module = [sys.executable, "-B", *SAFE_FLAGS, "-m", "jev_harness.check"]
    fds = (status_w, go_r, verdict_w)
    argv = [*module, os.path.abspath(path), workdir, *(str(fd) for fd in fds)]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=SPAWN_CWD,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=fds,
            start_new_session=True,
        )
    finally:
        for fd in fds:
            os.close(fd)
    sent = {"inputs": inputs, "limits": limits.as_dict()}
    if source is not None:  # latin-1: every byte one character, both ways
        sent["source"] = source.decode("latin-1")
    _feed(proc, json.dumps(sent).encode())
    deadline = time.monotonic() + PROBE_TIMEOUT_S + GRACE_S
    confined, why = _admit(status_r, go_w, deadline, proc.pid)
    os.close(status_r)
    os.close(go_w)
    if confined is None:  # the probe was stopped before the script ran
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.stdout is not None
    said, verdict, timed_out = _collect(proc.stdout.fileno(), verdict_r, proc, deadline)
    proc.stdout.close()
    os.close(verdict_r)
    _show(said)
    if confined is None:
        return _failed(why, static)
    if timed_out:
        return _failed(f"the script did not finish loading within {PROBE_TIMEOUT_S:g} s", static)
    return _verdict(static, verdict, proc.returncode)


def _read_source(path: str) -> bytes | None:
    """The script's bytes, read once here (the probe checks these same bytes, so what is
    parsed here is what runs there), or None to leave reading, and naming why not, to it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_SOURCE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= MAX_SOURCE else None


def _static_problems(path: str, data: bytes | None) -> list[str]:
    """What this process sees in the script's source without running it: a module that binds
    no name `workflow` at its top level defines none, whatever its code says. A source that
    cannot be parsed is left to the probe, which names why."""
    if data is None:
        return []
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [] if "workflow" in _top_level_names(tree.body) else [NO_WORKFLOW]


def _top_level_names(body: list[ast.stmt]) -> set[str]:
    """The names a module's top-level statements bind (into if/try/with/for blocks, not into
    functions or classes), with every dynamic way to bind one counted as binding `workflow`."""
    names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # what their bodies bind is not the module's (barring `global`)
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):  # `from m import *` may bind it
            names.add("workflow" if node.name == "*" else (node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Attribute) and node.attr == "workflow":
            names.add("workflow")  # sys.modules[__name__].workflow = ...: left to the probe
        elif isinstance(node, ast.Constant) and node.value == "workflow":
            names.add("workflow")  # globals()["workflow"] = ... and the like
        elif isinstance(node, ast.Global):
            names.update(node.names)
        elif isinstance(node, ast.Call):  # exec(...), globals().update(...): dynamic
            func = node.func
            if isinstance(func, ast.Name) and func.id in {"globals", "vars", "exec", "eval"}:
                names.add("workflow")  # not decidable statically: the probe decides
        stack.extend(ast.iter_child_nodes(node))
    return names


def _admit(status_r: int, go_w: int, deadline: float, probe: int) -> tuple[bool | None, str]:
    """Read the probe's status line (written before any of the script's code) and decide:
    (True, "") once /proc shows the confinement and the probe is let go, (False, why) for an
    unconfined probe once /proc shows it guarded and the warning is on stderr (before any of
    the script's code: nothing it does takes the warning back), (None, problem) when the
    probe must not go on."""
    line = bytearray()
    while b"\n" not in line and len(line) < MAX_STATUS:
        with selectors.DefaultSelector() as sel:
            sel.register(status_r, selectors.EVENT_READ)
            if not sel.select(max(0.0, deadline - time.monotonic())):
                return None, f"the check process said nothing within {PROBE_TIMEOUT_S:g} s"
        chunk = os.read(status_r, MAX_STATUS)
        if not chunk:
            break
        line += chunk
    word, _, rest = bytes(line).partition(b"\n")[0].decode("utf-8", "replace").partition(" ")
    if word == "unconfined":
        why = rest.strip() or "unknown"
        wanting = _confinement_wanting(probe, GUARDED)
        if wanting:
            return None, f"the check process is neither confined nor guarded ({why}; {wanting})"
        sys.stderr.write(UNCONFINED.format(why=why))
        sys.stderr.flush()
        with contextlib.suppress(OSError):
            os.write(go_w, b"g")
        return False, why
    if word != "confined" or not rest.strip().isdigit():
        return None, "the check process ended before it checked anything"
    wanting = _confinement_wanting(int(rest))
    if wanting:
        return None, f"the check process is not confined as it must be ({wanting}); nothing ran"
    with contextlib.suppress(OSError):
        os.write(go_w, b"g")
    return True, ""


def _confinement_wanting(pid: int, guarded_only: bool = False) -> str:
    """What /proc/PID lacks of the probe's confinement (with `guarded_only`, of the guard an
    unconfined probe has: no_new_privs, a seccomp filter, no effective or permitted
    capability), or "" when it is all there."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            fields = dict(line.partition(":")[::2] for line in f.read().splitlines())
        uid_map: list[str] = []
        if not guarded_only:
            with open(f"/proc/{pid}/uid_map", encoding="utf-8") as f:
                uid_map = f.read().split()
    except OSError as exc:
        return f"/proc/{pid}: {exc.strerror}"
    wanting = []
    if not guarded_only and len(fields.get("NSpid", "").split()) < 2:
        wanting.append("no PID namespace of its own")
    if not guarded_only and uid_map[:3] == ["0", "0", "4294967295"]:
        wanting.append("the host's user namespace")
    if fields.get("NoNewPrivs", "").strip() != "1":
        wanting.append("no no_new_privs")
    if fields.get("Seccomp", "").strip() != "2":
        wanting.append("no seccomp filter")
    for cap in ("CapEff", "CapPrm") if guarded_only else ("CapEff", "CapPrm", "CapBnd"):
        if int(fields.get(cap, "1").strip() or "1", 16) != 0:
            wanting.append(f"{cap} not empty")
    return ", ".join(wanting)


def _verdict(static: list[str], verdict: bytes, status: int | None) -> dict[str, Any]:
    """The verdict from the probe's finding, decoded strictly; `ok` decided here."""
    if not verdict:
        if status == 128 + signal.SIGXCPU:  # RLIMIT_CPU, past the watchdog (C code, say)
            why = "the script hit the CPU time limit (RLIMIT_CPU; JEV_HARNESS_CPU_S)"
            return _failed(why, static)
        # a signal: the probe's own (negative) or its confined child's, relayed as 128 + it
        signum = -status if status is not None and status < 0 else 0
        if status is not None and 128 < status <= 128 + 64:
            signum = status - 128
        if signum:
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = f"signal {signum}"
            why = f"the check process was killed by {name} and gave no finding"
            return _failed(why, static)
        return _failed(f"the check process ended with status {status} and gave no finding", static)
    if len(verdict) > MAX_VERDICT:
        return _failed(f"the check process's finding exceeds {MAX_VERDICT} bytes", static)
    try:
        finding = msgspec.json.decode(verdict, type=Finding)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return _failed(f"the check process gave no well-formed finding ({exc})", static)
    problems = [*finding.problems, *(p for p in static if p not in finding.problems)]
    return {
        "ok": not problems,
        "problems": problems,
        "tools": [msgspec.to_builtins(t) for t in finding.tools],
        "labels": list(finding.labels),
    }


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """The inputs on the probe's stdin, from a thread (they may exceed a pipe's buffer)."""

    def write() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write(data)
        with contextlib.suppress(OSError):
            proc.stdin.close()

    threading.Thread(target=write, daemon=True, name="check-inputs").start()


def _collect(
    out_fd: int, verdict_fd: int, proc: subprocess.Popen[bytes], deadline: float
) -> tuple[bytes, bytes, bool]:
    """Read both pipes to their end (every process holding them gone), keeping at most
    MAX_SAID and MAX_VERDICT bytes; past the deadline kill the probe's process group."""
    bufs = {out_fd: bytearray(), verdict_fd: bytearray()}
    caps = {out_fd: MAX_SAID, verdict_fd: MAX_VERDICT + 1}
    dropped = 0
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                room = caps[key.fd] - len(bufs[key.fd])
                bufs[key.fd] += chunk[:room]
                dropped += len(chunk) - min(room, len(chunk)) if key.fd == out_fd else 0
    proc.wait()
    said = bytes(bufs[out_fd])
    if dropped:
        said += f"\n[check-task: {dropped} more bytes of the script's output not shown]\n".encode()
    return said, bytes(bufs[verdict_fd]), timed_out


def _show(said: bytes) -> None:
    """What the script printed, on our stderr: redacted and inert, like all that leaves jmp."""
    if not said:
        return
    from kernel.display import terminal_safe
    from kernel.store.redact import Redactor, environment_secrets

    text = Redactor(environment_secrets()).text(said.decode("utf-8", "replace"))
    sys.stderr.write(terminal_safe(text))


def _failed(problem: str, static: list[str] | None = None) -> dict[str, Any]:
    return {"ok": False, "problems": [problem, *(static or [])], "tools": [], "labels": []}
