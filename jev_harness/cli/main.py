"""`jev-harness`: check-task, run and inspect (docs/HARNESS.md section 6).

Exit status: 0 for `completed`, a sound `check-task` and `inspect`; 2 otherwise (usage errors
included). With `--json`, `run` prints every persisted event as a JSON line, then one `result`
line, exactly like `jmp --json`; diagnostics go to stderr.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # check-task writes no file at all, bytecode caches included

import argparse  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
from typing import Any  # noqa: E402

from host.inspection import forbid_inspection  # noqa: E402
from jev_harness.cli.options import (  # noqa: E402
    UsageError,
    add_run_options,
    check_limits,
    json_arg,
    script_limits,
)
from jev_harness.cli.output import Output  # noqa: E402
from kernel.config import keys  # noqa: E402

UsageProblem = UsageError  # a wrong command line, named (exit 2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageProblem(f"{message} (see jev-harness --help)")


class _Version(argparse.Action):
    """`--version`: jmp's version (jev-harness ships with jmp), looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from kernel.config.install import DISTRIBUTION, version

        sys.stdout.write(f"jev-harness {version()} ({DISTRIBUTION})\n")
        parser.exit(0)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jev-harness", description="Run thin task scripts with Jev choosing.")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check = sub.add_parser("check-task", help="check a task script statically (no network)")
    check.add_argument("file", help="the task script (it defines workflow = TaskScript(build))")
    check.add_argument("--inputs", metavar="JSON", help="also build the task with these inputs")
    check.add_argument(
        "--json", action="store_true", help='one JSON object: {"ok", "problems", "tools", ...}'
    )
    run = sub.add_parser("run", help="run a task script with Jev deciding each step")
    run.add_argument("file", help="the task script")
    add_run_options(run)
    run.add_argument(
        "--json", action="store_true", help="JSON lines on stdout, as jmp --json, then a result"
    )
    examples = sub.add_parser("examples", help="where the example task scripts are; --copy DIR")
    examples.add_argument(
        "--copy", metavar="DIR", help="copy them into DIR (e.g. examples, for the docs' commands)"
    )
    inspect = sub.add_parser("inspect", help="a session's status and receipt")
    inspect.add_argument("session_id", help="the session id (32 hex digits)")
    inspect.add_argument(
        "--sessions-dir", metavar="PATH", help="session storage (or JMP_SESSIONS_DIR; see jmp -h)"
    )
    inspect.add_argument(
        "--json", action="store_true", help='one JSON object: {"session_id", "status", ...}'
    )
    return p


def check_task(args: argparse.Namespace, out: Output) -> int:
    from jev_harness.cli.check_launch import check_task as probe

    inputs = json_arg("--inputs", args.inputs, obj=True)
    _exists(args.file)
    verdict = probe(os.path.abspath(args.file), inputs, script_limits())
    out.verdict(verdict)
    return 0 if verdict.get("ok") else 2


def _exists(script: str) -> None:
    """A missing task script is a usage error; one of the examples' says how to get them. A
    path that is there but not a regular file (a FIFO, a device, a directory) says so."""
    if os.path.isfile(script):
        return
    if os.path.lexists(script):
        raise UsageProblem(f"task script {script} is not a regular file")
    hint = ""
    if os.path.basename(script) in ("workspace_task.py", "research_task.py"):
        hint = (
            "; the example scripts ship with jmp: `jev-harness examples --copy "
            f"{os.path.dirname(script) or '.'}` puts them there"
        )
    raise UsageProblem(f"task script {script} does not exist or is not a file{hint}")


def examples(args: argparse.Namespace, out: Output) -> int:
    """Where the example task scripts are, or (--copy DIR) a copy of them in DIR; a file there
    that differs is never overwritten (exit 2, named)."""
    import shutil
    from pathlib import Path

    from kernel.config.install import examples_dir

    source = examples_dir()
    if source is None:
        raise UsageProblem("this installation has no example scripts (share/jmp/examples)")
    scripts = sorted(source.glob("*_task.py"))
    if args.copy is None:
        print(f"the example task scripts are in {source}:")
        print("\n".join(f"  {p.name}" for p in scripts))
        print("copy them out with: jev-harness examples --copy examples")
        return 0
    target = Path(args.copy)
    clash = [
        str(target / p.name)
        for p in scripts
        if (target / p.name).exists() and (target / p.name).read_bytes() != p.read_bytes()
    ]
    if clash:
        raise UsageProblem(f"not overwritten (they differ from the examples): {', '.join(clash)}")
    target.mkdir(parents=True, exist_ok=True)
    for p in scripts:
        shutil.copyfile(p, target / p.name)
    print(f"copied {len(scripts)} example scripts into {target}; for example:")
    print(f"  jev-harness check-task {target / scripts[0].name}")
    return 0


def run(args: argparse.Namespace, out: Output) -> int:
    import msgspec  # noqa: F401  -- this Python's dependencies before the script (main's advice)

    from jev_harness.session import open_session

    _exists(args.file)

    inputs = json_arg("--inputs", args.inputs, obj=True)
    context = json_arg("--context", args.context, obj=False)
    check_limits(args)
    if not os.environ.get("TYPESAFE_API_KEY", "").strip():
        raise UsageProblem("not set: TYPESAFE_API_KEY (Jev decides each tool and parameter)")
    session = open_session(
        args.file,
        args.goal,
        inputs,
        context=context,
        max_steps=args.max_steps,
        timeout=args.timeout,
        sessions_dir=args.sessions_dir,
        on_event=out.event,
    )
    out.session_id = session.session_id
    previous = _on_interrupt(session.engine.cancel)
    try:
        session.delegate(reject_exhausted=False)
    finally:
        result = session.close()  # the run's result: its final, written once
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    out.result(result)
    return 0 if result.get("status") == "completed" else 2


def inspect(args: argparse.Namespace, out: Output) -> int:
    from kernel.harness.inspect import inspect_session
    from kernel.store.catalog import is_session_id, sessions_home

    if not is_session_id(args.session_id):
        raise UsageProblem(f"{args.session_id!r} is not a session id (32 hex digits)")
    out.session_id = args.session_id
    report = inspect_session(sessions_home(args.sessions_dir), args.session_id)
    out.report(report)
    return 0


def _on_interrupt(cancel: Any) -> Any:
    """The first Ctrl+C cancels between steps; a second one aborts."""

    def handler(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        # raw write: a buffered stderr write may be under way in the interrupted frame
        os.write(2, b"jev-harness: cancelling after the current step (Ctrl+C again to stop it)\n")

    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:
        return None


COMMANDS = {"check-task": check_task, "run": run, "inspect": inspect, "examples": examples}


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    forbid_inspection()  # it holds the keys (its environment): before any child exists
    argv = sys.argv[1:] if argv is None else list(argv)
    unusable = keys.load_or_error()  # before the redactor is made: it knows the stored keys too
    out = Output(json="--json" in argv)
    out.command = next((a for a in argv if a in COMMANDS), "")
    try:
        if unusable is not None:
            raise unusable
        args = parser().parse_args(argv)
        return COMMANDS[args.command](args, out)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except UsageProblem as exc:
        return out.fail(str(exc))
    except KeyboardInterrupt:
        return out.fail("interrupted", status="cancelled")
    except Exception as exc:
        from kernel.config.install import missing_dependency
        from kernel.errors import JmpError

        if isinstance(exc, JmpError):
            return out.fail(str(exc))
        from kernel.store.redact import debug_traceback

        debug_traceback(exc, out.redactor)
        return out.fail(missing_dependency(exc) or f"internal error: {type(exc).__name__}: {exc}")


def entry() -> None:
    """Console script `jev-harness`."""
    sys.exit(main())
