"""The real tool worker (OpenHands executors) through kernel.supervision.tools.Tools: effects and
refusals."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from kernel.supervision.supervisor import Worker, WorkerDied, WorkerFailed
from kernel.supervision.tools import Tools
from tests.support.warm import suite_pool
from tests.support.workers import close_within, live_with, pid_running, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _tools(base: Path) -> Tools:
    workspace = base / "ws"
    workspace.mkdir(exist_ok=True)
    tools = Tools(workspace, base / "terminal")
    tools.start()
    return tools


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tools]:
    """One warm tool worker for the tests that do not kill it (startup costs seconds)."""
    tools = _tools(tmp_path_factory.mktemp("tw"))
    try:
        yield tools
    finally:
        close_within(tools)


def call(tools: Tools, tool: str, **arguments: object):  # type: ignore[no-untyped-def]
    return tools.run(uuid.uuid4().hex, tool, dict(arguments))


def test_specs_are_slices_of_the_native_schemas(shared: Tools) -> None:
    from openhands.tools.file_editor.definition import FileEditorAction
    from openhands.tools.terminal.definition import TerminalAction

    specs = {spec.name: spec for spec in shared.specs()}
    assert list(specs) == ["read", "write", "edit", "bash"]
    native = FileEditorAction.model_json_schema()["properties"]
    read = specs["read"].parameters
    assert set(read["properties"]) == {"path", "view_range"} and read["required"] == ["path"]
    assert read["properties"]["view_range"] == native["view_range"]
    assert read["additionalProperties"] is False
    assert specs["write"].parameters["required"] == ["path", "file_text"]
    edit = specs["edit"].parameters["properties"]
    assert edit["command"]["enum"] == ["str_replace", "insert"]
    assert edit["insert_line"] == native["insert_line"]
    bash = specs["bash"].parameters["properties"]
    native_bash = TerminalAction.model_json_schema()["properties"]
    assert {k: {**v, "description": ""} for k, v in bash.items()} == {
        k: {**native_bash[k], "description": ""} for k in bash
    }  # the timeout description states jmp's limit
    assert set(bash) == {"command", "is_input", "timeout"}


def test_worker_descriptions_are_the_catalogs(shared: Tools) -> None:
    from protocol.catalog import BUILTINS

    for spec in shared.specs():
        assert spec.description == BUILTINS[spec.name].description, spec.name


def test_write_read_edit_bash_round_trip(shared: Tools) -> None:
    ws = shared.workspace
    name = f"f{uuid.uuid4().hex[:6]}.txt"
    checked = shared.validate("write", {"path": name, "file_text": "alpha\nbeta\n"})
    assert checked.arguments["path"] == str(ws / name) and checked.target == str(ws / name)
    assert not (ws / name).exists()  # validation has no effect
    assert call(shared, "write", path=name, file_text="alpha\nbeta\n").status == "ok"
    assert (ws / name).read_text() == "alpha\nbeta\n"
    read = call(shared, "read", path=name, view_range=[2, 2])
    assert read.status == "ok" and "beta" in read.text and "alpha" not in read.text
    assert read.exit_code is None
    edited = call(shared, "edit", command="str_replace", path=name, old_str="beta", new_str="B")
    assert edited.status == "ok" and (ws / name).read_text() == "alpha\nB\n"
    call(shared, "edit", command="insert", path=str(ws / name), insert_line=0, new_str="top")
    assert (ws / name).read_text() == "top\nalpha\nB\n"
    bash = call(shared, "bash", command=f"cat {name} && ls --color=always")
    assert bash.status == "ok" and bash.exit_code == 0
    assert "top\nalpha\nB" in bash.text and "\x1b" not in bash.text
    failing = call(shared, "bash", command="exit_code_test() { return 3; }; exit_code_test")
    assert failing.exit_code == 3 and failing.status == "error"
    again = call(shared, "write", path=name, file_text="x")  # the editor refuses to overwrite
    assert again.status == "error" and again.error


def test_paths_outside_the_workspace_are_refused(shared: Tools, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    (shared.workspace / "link").unlink(missing_ok=True)
    (shared.workspace / "link").symlink_to(tmp_path)
    for path in (str(outside), "../outside.txt", "link/outside.txt"):
        with pytest.raises(WorkerFailed) as refused:
            call(shared, "write", path=path, file_text="no")
        assert refused.value.code == "invalid_arguments" and "outside the workspace" in str(
            refused.value
        )
        with pytest.raises(WorkerFailed):
            shared.validate("read", {"path": path})
    assert not outside.exists()


def test_invalid_arguments_write_nothing(shared: Tools) -> None:
    ws = shared.workspace
    cases = [
        ("write", {"path": "bad1.txt", "file_text": 5}, "file_text"),
        ("write", {"path": "bad2.txt", "file_text": "x", "mode": "w"}, "unexpected argument"),
        ("write", {"path": "bad3.txt"}, "missing required argument 'file_text'"),
        ("edit", {"command": "insert", "path": "bad4.txt", "new_str": "x"}, "insert_line"),
        ("edit", {"command": "create", "path": "bad5.txt", "new_str": "x"}, "command"),
        ("bash", {"command": "touch bad6.txt", "reset": True}, "unexpected argument 'reset'"),
        ("read", {"path": 7}, "path"),
    ]
    for tool, args, needle in cases:
        for attempt in (shared.validate, functools.partial(_run_args, shared)):
            with pytest.raises(WorkerFailed) as failed:
                attempt(tool, args)
            assert failed.value.code == "invalid_arguments", (tool, args)
            assert needle in failed.value.detail, (tool, args, failed.value.detail)
    with pytest.raises(WorkerFailed) as unknown:
        shared.validate("format_disk", {})
    assert unknown.value.code == "unknown_tool"
    assert sorted(p.name for p in ws.glob("bad*")) == []


def _run_args(tools: Tools, tool: str, args: dict[str, object]) -> object:
    return tools.run(uuid.uuid4().hex, tool, dict(args))


@pytest.mark.slow  # asserts a wall-clock bound
def test_cancel_interrupts_a_running_command(shared: Tools) -> None:
    marker = f"{time.time() % 100:.3f}"
    cancel, cancelled_at = threading.Event(), []
    needle = f"sleep 3{marker}"
    threading.Thread(target=_cancel_when_running, args=(needle, cancel, cancelled_at)).start()
    result = shared.run(uuid.uuid4().hex, "bash", {"command": needle}, cancel=cancel)
    assert time.monotonic() - cancelled_at[0] < 10  # honoured soon after the cancel
    assert result.interrupted and result.status == "error"
    # unfinished, whatever the shell said after C-c (130) or the SIGKILL that followed (137)
    assert result.exit_code == -1 and result.reason == "cancelled"
    assert "exit code" not in result.text and "interrupted by cancel" in result.text  # one fact
    assert live_with(f"sleep 3{marker}") == []
    assert call(shared, "bash", command="echo still-here").text.startswith("still-here")


def _cancel_when_running(needle: str, cancel: threading.Event, at: list[float]) -> None:
    wait_until(lambda: live_with(needle), 90, needle)  # a cold worker on a loaded machine
    at.append(time.monotonic())
    cancel.set()


def test_timeout_gives_an_unfinished_exit_code(shared: Tools) -> None:
    result = shared.run(uuid.uuid4().hex, "bash", {"command": "sleep 2.5"}, timeout_s=0.5)
    assert result.exit_code == -1
    call(shared, "bash", command="C-c", is_input=True)  # stop it, as a model would


@pytest.mark.slow  # asserts a wall-clock bound
def test_killed_worker_takes_its_shell_along(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    command = f"sleep 30.{uuid.uuid4().int % 10**6:06d}"  # ours alone, on a shared machine
    try:
        tools.specs()
        pid = tools.worker.pid or 0
        outcome: list[object] = []
        runner = threading.Thread(target=_run_catching, args=(tools, command, outcome))
        runner.start()
        wait_until(lambda: live_with(command), 20, "the sleep command")
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        runner.join(5)
        assert time.monotonic() - killed_at < 2.0
        died = outcome[0]
        assert isinstance(died, WorkerDied) and died.signal == signal.SIGKILL, died
        assert "tool worker" in str(died) and "SIGKILL" in str(died)
        assert live_with(command) == []
        # No restart call: the dead worker is replaced before the next call (restart.py).
        assert call(tools, "bash", command="echo reborn").text.startswith("reborn")
        assert tools.worker.pid != pid
    finally:
        close_within(tools)
    assert not pid_running(pid)


def _run_catching(tools: Tools, command: str, outcome: list[object]) -> None:
    try:
        outcome.append(tools.run(uuid.uuid4().hex, "bash", {"command": command}))
    except BaseException as exc:
        outcome.append(exc)


KERNEL_SCRIPT = """
import sys, uuid
from kernel.supervision.tools import Tools
tools = Tools(sys.argv[1], sys.argv[2])
tools.start()
tools.specs()
print(tools.worker.pid, flush=True)
tools.run(uuid.uuid4().hex, "bash", {"command": "sleep 987.6"})
"""


def test_worker_and_shell_exit_when_the_kernel_is_sigkilled(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    kernel = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(KERNEL_SCRIPT),
            str(tmp_path / "ws"),
            str(tmp_path / "term"),
        ],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    try:
        assert kernel.stdout is not None
        worker_pid = int(kernel.stdout.readline())
        wait_until(lambda: live_with("sleep 987.6"), 20, "the sleep command")
        kernel.kill()
        kernel.wait()
        wait_until(lambda: not pid_running(worker_pid), 5, "the worker to exit")
        wait_until(lambda: not live_with("sleep 987.6"), 5, "the shell's sleep to die")
    finally:
        kernel.kill()
        kernel.wait()
        if kernel.stdout is not None:
            kernel.stdout.close()
        for proc in live_with("987.6"):
            proc.kill()


@pytest.mark.parametrize("start_s", [0, 2])
def test_the_first_command_on_a_new_shell_gets_its_own_output(tmp_path: Path, start_s: int) -> None:
    """Found under load: OpenHands types the terminal's setup line and sleeps a blind second; a
    bash that had not run it by then printed its echo and prompt after the screen was cleared,
    and the first call returned that text (or its own echo) with exit code 0 while its command
    still ran. A bash that takes two seconds to start makes every machine that slow. The blind
    second itself is skipped (issue 11: it was most of a warm worker's first effect), so a
    shell that starts at once must be proven settled too."""
    import shutil

    from openhands.tools.terminal.definition import TerminalAction

    from workers.tool import terminal
    from workers.tool.shell import BashRunner

    slow = tmp_path / "slow-bash"
    slow.write_text(f'#!/bin/sh\nsleep {start_s}\nexec {shutil.which("bash")} --norc "$@"\n')
    slow.chmod(0o700)
    skipped: list[list[float]] = []
    real = terminal.without_blind_wait

    @contextlib.contextmanager
    def spy() -> Iterator[list[float]]:
        with real() as waits:
            skipped.append(waits)
            yield waits

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(terminal, "without_blind_wait", spy)
        executor = terminal.start_terminal(str(tmp_path), str(slow), None)
    try:
        # OpenHands' one blind wait was skipped: if its start changes, this says so.
        assert skipped == [[terminal.BLIND_WAIT_S]]
        action = TerminalAction(command="echo first-$((6*7)); false")
        text = BashRunner(None, 30, 100_000).run(executor, action, threading.Event())
        observation = text.observation
        assert "first-42" in observation.text and observation.exit_code == 1
        # Neither the setup line nor the command's own echo is output (both leaked before).
        assert "PROMPT_COMMAND" not in observation.text
        assert "echo first" not in observation.text
        assert "JMP_SETTLED" not in observation.text
    finally:
        executor.close()


def test_nothing_but_commands_is_typed_into_the_shell(tmp_path: Path) -> None:
    """OpenHands' clear after each command looked for its prompt with `\n` line ends in the
    PTY's `\r\n` text, found none and typed an Enter for a new prompt. Under load the next
    command was typed before that prompt came, and the prompt ended it: its own echo, exit
    code 0, while it still ran (tests/workers/test_tool_worker.py's first-command case failed
    so under two processes). Now the last prompt is kept and only commands are typed."""
    from openhands.tools.terminal.definition import TerminalAction

    from workers.tool import terminal
    from workers.tool.shell import BashRunner

    executor = terminal.start_terminal(str(tmp_path), terminal.rc_free_bash(tmp_path), None)
    shell = executor.session.terminal
    typed: list[bytes] = []
    write = shell._write_pty
    shell._write_pty = lambda data: (typed.append(data), write(data))[1]
    try:
        runner = BashRunner(None, 30, 100_000)
        outputs = []
        for n in (1, 2, 3):
            action = TerminalAction(command=f"echo out-$(({n}*7)); (exit {n})")
            observation = runner.run(executor, action, threading.Event()).observation
            outputs.append((observation.text.count(f"out-{n * 7}"), observation.exit_code))
        assert outputs == [(1, 1), (1, 2), (1, 3)]
        assert typed == [f"echo out-$(({n}*7)); (exit {n})\n".encode() for n in (1, 2, 3)]
    finally:
        executor.close()


def test_only_the_starting_threads_blind_wait_is_skipped() -> None:
    """The patched `time` of OpenHands' terminal module skips one 1.0 s sleep of the thread
    that starts a terminal; any other thread's sleep (a PTY reader, a second worker thread)
    and any other length stay real, and the module gets its `time` back afterwards."""
    from openhands.tools.terminal.terminal import subprocess_terminal as module

    from workers.tool.terminal import without_blind_wait

    with without_blind_wait() as skipped:
        other = threading.Thread(target=module.time.sleep, args=(1.0,))
        other.start()
        other.join()
        assert skipped == []  # another thread's second was real
        module.time.sleep(1.0)  # this thread's: skipped
        assert skipped == [1.0]
        module.time.sleep(0.01)  # another length: real
        module.time.sleep(1.0)  # only once
        assert skipped == [1.0]
    assert module.time is time


def test_the_shell_does_not_source_the_persons_rc_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's environment is already the person's; a ~/.bashrc would run again in every
    new shell (pyenv's rehash there waited 60 s on a stale lock) and print into the output."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("export JMP_RC_SOURCED=yes\necho RC-PRINTED\n")
    (home / ".bash_profile").write_text("export JMP_RC_SOURCED=profile\n")
    monkeypatch.setenv("HOME", str(home))
    tools = _tools(tmp_path)
    try:
        result = call(tools, "bash", command="echo rc=[$JMP_RC_SOURCED]")
        assert "rc=[]" in result.text and "RC-PRINTED" not in result.text
    finally:
        close_within(tools)


@pytest.mark.parametrize("warm", [False, True])
def test_a_standalone_worker_removes_the_shell_dir_it_made_in_its_tmpdir(
    tmp_path: Path,
    short_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    warm: bool,
    warm_pool_of_this_session: Path,
) -> None:
    """Without --terminal-dir the worker makes a temp dir for its bash launcher, in its
    kernel's TMPDIR (warm too: the pool's preload cached the pool's own in `tempfile`); it is
    gone once the worker exits. Warm: forked by the suite's pool (its preload is the same)."""
    monkeypatch.setenv("JMP_WARM", "1" if warm else "0")
    pool_pid = suite_pool(warm_pool_of_this_session) if warm else None
    tmp, workspace = tmp_path / "tmp", tmp_path / "ws"
    tmp.mkdir()
    workspace.mkdir()
    env = {"TMPDIR": str(tmp)}
    with contextlib.ExitStack() as stack:
        worker = Worker("tool", short_tmp, env=env, argv=["--workspace", str(workspace)])
        stack.enter_context(worker)
        worker.start()
        worker.wait_ready(120)
        if pool_pid is not None:
            assert psutil.Process(worker.pid or 0).ppid() == pool_pid  # forked by the pool
        (made,) = tmp.glob("jmp-sh-*")
        assert (made / "bash-norc").exists()
        worker.close()
        assert worker.exited and not made.exists()
