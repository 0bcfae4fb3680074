"""`jmp` / `python main.py`: parse and validate the command line, then list or run.

Imports stay lazy: `--list` must start nearly as fast as a bare interpreter, so nothing here
pulls in msgspec, zmq or any vendor SDK until a run needs it; `--version` and `--help` load
argparse, cli/about.py, kernel/errors.py and kernel/config/install.py and no other module of
jmp's, not even typing or json (issue 33; tests/cli/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cli.about import Version, epilog
from kernel.errors import JmpError, SessionNotFound, UsageError, WorkspaceMismatch

TYPE_CHECKING = False  # not `typing`'s: importing typing is a tenth of a bare start
if TYPE_CHECKING:
    from typing import TextIO

    from _typeshed import SupportsWrite

    from cli.printer import Printer
    from kernel.store.redact import Redactor

ACK_WITH_COMPACT = (
    "--compact and --ack-interrupted do not combine: acknowledge first "
    "(--session ID --ack-interrupted), then compact (--session ID --compact)"
)
_RUN_FLAGS = ("prompt", "workspace", "no_mcp", "session", "compact", "ack_interrupted")


class _Parser(argparse.ArgumentParser):
    help_file: TextIO | None = None  # --json: help goes to stderr, stdout is JSON lines only

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see jmp --help)")

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        super().print_help(file or self.help_file)


def _formatter(prog: str) -> argparse.HelpFormatter:
    # argparse's default width probe imports shutil (and bz2, lzma): 10% of a --list start.
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        columns = int(os.environ.get("COLUMNS", "") or 80)
    # Raw: the epilog is a table of variables, laid out by hand.
    return argparse.RawDescriptionHelpFormatter(prog, width=max(columns - 2, 40))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="jmp",
        description="A crash-safe local coding agent.",
        formatter_class=_formatter,
        epilog=epilog(),
    )
    p.add_argument("prompt", nargs="?", help="the task, or a follow-up with --session")
    p.add_argument("--json", action="store_true", help="JSON lines on stdout")
    p.add_argument("--workspace", metavar="PATH", help="workspace of a new session (default: .)")
    p.add_argument("--no-mcp", action="store_true", help="skip MCP servers")
    p.add_argument("--session", metavar="ID", help="continue, replay or retry a session")
    p.add_argument("--compact", action="store_true", help="compact the session locally, no model")
    p.add_argument("--ack-interrupted", action="store_true", help="acknowledge uncertain calls")
    p.add_argument("--verify", action="store_true", help="check every line of a session's log")
    p.add_argument("--list", action="store_true", help="list sessions")
    p.add_argument("--sessions-dir", metavar="PATH", help="session storage (or JMP_SESSIONS_DIR)")
    p.add_argument(
        "--acp", action="store_true", help="serve the Agent Client Protocol on stdin/stdout"
    )
    p.add_argument(
        "--setup",
        action="store_true",
        help="ask for the model keys, check them and store them (~/.config/jmp/keys.json)",
    )
    p.add_argument(
        "--stop-pool", action="store_true", help="stop this installation's warm worker pool"
    )
    p.add_argument(
        "--json-schema",
        action="store_true",
        help="print the JSON Schema of every line --json prints, and exit",
    )
    p.add_argument("--version", action=Version)
    return p


def _check_text(args: argparse.Namespace) -> None:
    """Arguments must be UTF-8 text: argv bytes that are not arrive as surrogates (issue 9)."""
    from kernel.store.workspace import utf8_problem

    for name in ("prompt", "workspace", "session", "sessions_dir"):
        value = getattr(args, name)
        problem = utf8_problem(value) if isinstance(value, str) else ""
        if problem:
            what = "the prompt" if name == "prompt" else "--" + name.replace("_", "-")
            raise UsageError(f"{what} is not valid UTF-8 text ({problem}); nothing was recorded")


def _validate(args: argparse.Namespace) -> None:
    """Every usage error, checked before anything is created."""
    if args.json_schema:
        extra = [
            f for f in vars(args) if f != "json_schema" and getattr(args, f) not in (None, False)
        ]
        if extra:
            raise UsageError(f"--json-schema takes no other option (got {_named(extra)})")
        return
    if args.setup:  # `jmp --acp --setup` too: ACP's terminal auth appends its args
        extra = [
            f
            for f in (*_RUN_FLAGS, "list", "json", "verify", "stop_pool", "sessions_dir")
            if getattr(args, f) not in (None, False)
        ]
        if extra:
            raise UsageError(f"--setup takes no other option (got {_named(extra)})")
        return
    if args.acp:
        extra = [
            f
            for f in (*_RUN_FLAGS, "list", "json", "verify", "stop_pool")
            if getattr(args, f) not in (None, False)
        ]
        if extra:
            raise UsageError(f"--acp takes no prompt, session or run options (got {_named(extra)})")
        return
    if args.stop_pool:
        extra = [
            f
            for f in (*_RUN_FLAGS, "list", "json", "verify", "acp", "sessions_dir")
            if getattr(args, f) not in (None, False)
        ]
        if extra:
            raise UsageError(f"--stop-pool takes no other option (got {_named(extra)})")
        return
    if args.list:
        extra = [f for f in (*_RUN_FLAGS, "verify") if getattr(args, f) not in (None, False)]
        if extra:
            raise UsageError(f"--list takes no run options (got {_named(extra)})")
        return
    if args.prompt is not None and not args.prompt.strip():
        raise UsageError("the prompt is empty")
    if args.verify:
        extra = [f for f in _RUN_FLAGS if f != "session" and getattr(args, f) not in (None, False)]
        if extra or args.session is None:
            raise UsageError(f"--verify takes --session ID and nothing else (got {_named(extra)})")
    for flag in ("compact", "ack_interrupted"):
        if getattr(args, flag) and args.session is None:
            raise UsageError(f"--{flag.replace('_', '-')} needs --session ID")
    if args.compact and args.prompt is not None:
        raise UsageError("--compact takes no prompt")
    if args.compact and args.ack_interrupted:
        raise UsageError(ACK_WITH_COMPACT)
    if args.prompt is None and args.session is None:
        raise UsageError("nothing to do: give a task as the argument, or --session ID")
    if args.workspace is not None:
        from kernel.store.workspace import check_workspace

        try:
            check_workspace(args.workspace)
        except UsageError as exc:
            raise UsageError(f"--workspace {args.workspace!r}: {exc}") from None
    if args.session is not None:
        _validate_session(args)


def _named(flags: list[str]) -> str:
    return ", ".join("a prompt" if f == "prompt" else "--" + f.replace("_", "-") for f in flags)


def _validate_session(args: argparse.Namespace) -> None:
    from kernel.store.catalog import (
        HARNESS,
        harness_refusal,
        is_session_id,
        read_created_by,
        read_workspace,
        sessions_home,
    )

    home = sessions_home(args.sessions_dir)
    directory = home / args.session
    # lexists: a link or a FIFO there is a session that opening refuses with the reason.
    if not is_session_id(args.session) or not os.path.lexists(directory / "events.jsonl"):
        raise SessionNotFound(f"no session {args.session!r} in {home} (see jmp --list)")
    if read_created_by(directory) == HARNESS:
        raise harness_refusal(args.session)
    if args.workspace is None:
        return
    try:
        bound = Path(read_workspace(directory))
    except (OSError, ValueError, KeyError, TypeError):
        return  # opening the session will report what is wrong with its log
    if Path(args.workspace).expanduser().resolve() != bound.resolve():
        raise WorkspaceMismatch(
            f"session {args.session} is bound to workspace {bound}; "
            f"--workspace {args.workspace} differs"
        )


def _run(args: argparse.Namespace, printer: Printer) -> int:
    from cli import run
    from cli.options import Options

    workspace = Path(args.workspace).expanduser().resolve() if args.workspace else None
    options = Options(
        prompt=args.prompt,
        json=args.json,
        workspace=workspace,
        no_mcp=args.no_mcp,
        session=args.session,
        compact=args.compact,
        ack_interrupted=args.ack_interrupted,
        sessions_dir=args.sessions_dir,
    )
    return run.run(options, printer)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 completed/compacted/list, 2 otherwise)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv
    session: str | None = None
    printer: Printer | None = None
    try:
        parser = _parser()
        parser.help_file = sys.stderr if "--json" in argv else None  # type: ignore[attr-defined]
        args = parser.parse_args(argv)
        _check_text(args)  # before the id can be echoed: a non-UTF-8 one cannot be printed
        session = args.session
        _validate(args)
        if args.json_schema:
            from protocol.json_schema import text

            sys.stdout.write(text())
            return 0
        if args.list:
            from cli.listing import print_sessions
            from kernel.store.catalog import list_sessions, sessions_home

            home = sessions_home(args.sessions_dir)
            print_sessions(list_sessions(home), args.json, home)
            return 0
        if args.stop_pool:
            from kernel.supervision import pool_client

            where = pool_client.home()
            stopped = pool_client.stop()
            print(f"stopped the warm pool in {where}" if stopped else f"no warm pool in {where}")
            return 0
        from host.inspection import forbid_inspection  # not for --list: no protocol import

        forbid_inspection()  # it holds the keys (its environment): before any child exists
        if args.setup:
            from cli.setup import run as setup

            return setup()
        from kernel.config.keys import load

        load()  # the stored keys, under the environment's (kernel/config/keys.py)
        if args.acp:
            from acp_server.main import serve

            return serve(args.sessions_dir)
        if args.verify:
            from cli.verify import verify
            from kernel.store.catalog import sessions_home

            return verify(sessions_home(args.sessions_dir), args.session, args.json)
        printer = _printer(as_json)
        return _run(args, printer)
    except JmpError as exc:
        return _fail(printer or _printer(as_json), exc, session, "error")
    except KeyboardInterrupt:
        return _fail(printer or _printer(as_json), UsageError("interrupted"), session, "cancelled")
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except OSError as exc:  # the environment (storage, permissions), not a bug: say where
        printer = printer or _printer(as_json)
        return _fail(printer, _environment(exc, printer.redactor), session, "error")
    except Exception as exc:  # a bug: still exit 2 with a result line, never a bare traceback
        printer = printer or _printer(as_json)
        return _fail(printer, _internal(exc, printer.redactor), session, "error")


def _internal(exc: Exception, redactor: Redactor) -> JmpError:
    """An unexpected exception as a JmpError; its traceback only with JMP_DEBUG=1. A missing
    dependency is no bug: it says how to install jmp."""
    from kernel.config.install import missing_dependency
    from kernel.store.redact import debug_traceback

    debug_traceback(exc, redactor)
    advice = missing_dependency(exc)
    if advice is not None:
        return JmpError(advice)
    return JmpError(redactor.text(f"internal error: {type(exc).__name__}: {exc}"))


def _environment(exc: OSError, redactor: Redactor) -> JmpError:
    """An OSError no store boundary named: what the system refused, and where."""
    import errno

    from kernel.store.redact import debug_traceback

    debug_traceback(exc, redactor)
    where = " ".join(repr(os.fspath(f)) for f in (exc.filename, exc.filename2) if f is not None)
    code = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    what = exc.strerror or str(exc)
    return JmpError(
        redactor.text(f"environment error: {what} ({code})" + (f" at {where}" if where else ""))
    )


def _printer(as_json: bool) -> Printer:
    from cli.printer import Printer  # not needed by --list, which must start fast

    return Printer(json=as_json)


def _fail(printer: Printer, exc: JmpError, session: str | None, status: str) -> int:
    """The error on stderr and the result line, naming the session when the run reached one
    (a full disk mid-run: its records were printed, so it exists)."""
    printer.error(exc)
    sid = session or printer.session_id
    where = printer.session_dir if sid == printer.session_id else None
    printer.result({"session_id": sid, "status": status, "summary": str(exc), "session_dir": where})
    return 2  # every reported error exits 2 (WorkerDied.exit_code is the worker's status)


def entry() -> None:
    """Console script `jmp`."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
