"""`python -m jev_harness.mcp SCRIPT --goal TEXT --inputs JSON ...`: one session over stdio MCP.

Life of the process: the task is built in its harness worker before the first frame is read (a
bad script, bad JSON or a missing key is named on stderr, exit 2, and nothing is served); the
session itself is created at the first tool call (listing tools is not one), so a client that
only connects and lists leaves no session behind. `--timeout` counts from the process start.
On stdin EOF, SIGTERM or SIGINT the server stops: a call in flight gets STOP_GRACE_S to end (a
delegated run is cancelled between steps), else the harness worker is killed (the operation is
then `tool_uncertain`, never re-run); `final` is written if a session exists, toolkits are
closed (an owned Camofox tab deleted), both workers are stopped. Only MCP frames reach stdout:
file descriptor 1 is pointed at stderr for everything else, and diagnostics are redacted.
"""

from __future__ import annotations

import time

SERVER_START = time.monotonic()  # --timeout counts from here

import argparse  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from typing import Any  # noqa: E402

from host.inspection import forbid_inspection  # noqa: E402
from jev_harness.cli.options import UsageError, add_run_options, check_limits, json_arg  # noqa: E402
from kernel.config import keys  # noqa: E402
from kernel.config.install import program  # noqa: E402

STOP_GRACE_S = 5.0  # a call in flight at shutdown gets this long before its worker is killed


Usage = UsageError  # a wrong command line or a server that cannot start, named (exit 2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(f"{message} (see {self.prog} --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=program("jev-harness-mcp", "jev_harness.mcp"),
        description="Serve one jev-harness task session over stdio MCP.",
    )
    p.add_argument("script", metavar="SCRIPT", help="the task script")
    add_run_options(p)
    p.add_argument("--archive", metavar="FILE", help="mirror every persisted event line here")
    p.add_argument("--direct-only", action="store_true", help="no run_task, no Jev key needed")
    return p


class Archive:
    """`--archive FILE`: each persisted event line, byte for byte as in events.jsonl.

    FILE is created or emptied, but never through a planted name: a symbolic link, a FIFO, a
    device, a hard link or another user's file there is refused (host/own_files.py). Its
    missing directories are made as a report's are (`output`), and reached the same way: no
    link is followed below the working directory (jev_harness/report.py)."""

    def __init__(self, path: str) -> None:
        from pathlib import Path

        from host.own_files import open_own
        from jev_harness.report import open_directory

        target = Path(os.path.abspath(path))
        try:
            dirfd = open_directory(target.parent, create=True)
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                self.fd: int | None = open_own(target.name, flags, dir_fd=dirfd)
            finally:
                os.close(dirfd)
        except OSError as exc:
            raise Usage(f"--archive: cannot write {path}: {exc.strerror or exc}") from None

    def __call__(self, event: Any) -> None:
        from kernel.store.durable import write_all
        from protocol.codec import encode_event

        if event.seq is not None and self.fd is not None:  # transient events are not persisted
            write_all(self.fd, encode_event(event) + b"\n")

    def close(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = None


class Redacting(logging.Filter):
    def __init__(self, text: Any) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.text(record.getMessage()), None
        return True


def _redactor() -> Any:
    from kernel.config.settings import Settings
    from kernel.harness.opening import EXTRA_SECRETS
    from kernel.store.redact import Redactor

    try:
        secrets = list(Settings.environment().secrets)
    except Exception:
        secrets = [os.environ.get(k, "") for k in ("TYPESAFE_API_KEY", "FLASH_API_KEY")]
    secrets += [os.environ.get(k, "") for k in EXTRA_SECRETS]
    return Redactor(tuple(s for s in secrets if s))


class Server:
    """The prepared task, its session once a call needs it, its MCP front and the one stop."""

    def __init__(self, args: argparse.Namespace, archive: Archive | None, say: Any) -> None:
        from jev_harness.mcp.server import Front
        from jev_harness.session import prepare_session

        self.say, self.archive = say, archive
        self.deadline = SERVER_START + args.timeout
        self.pending = prepare_session(
            args.script,
            args.goal,
            json_arg("--inputs", args.inputs, obj=True),
            context=json_arg("--context", args.context, obj=False),
            max_steps=args.max_steps,
            timeout=args.timeout,
            sessions_dir=args.sessions_dir,
            direct_only=args.direct_only,
            on_event=archive,
        )
        self.current: Any = None  # the HarnessSession, from the first tool call on
        self._opening = threading.Lock()
        self._ended = False
        self._failed: str | None = None
        self.front = Front(
            self.session,
            args.direct_only,
            self.pending.redactor.value,
            say,
            opened=lambda: self.current,
        )
        self._stopping = threading.Lock()
        self.result: dict[str, Any] | None = None

    def session(self) -> Any:
        """The session, created by the first call that needs it (in the front's worker thread).

        Raises JmpError once the server is stopping, or when creating it failed."""
        from kernel.errors import JmpError

        with self._opening:
            if self.current is None:
                if self._ended or self._failed:
                    raise JmpError(self._failed or "the server is stopping")
                try:
                    session = self.pending.open()
                except Exception as exc:
                    self._failed = f"the session could not be created: {type(exc).__name__}: {exc}"
                    raise JmpError(self._failed) from None
                session.engine.deadline = self.deadline
                self.current = session
                self.say(f"serving session {session.session_id} (pid {os.getpid()})")
            return self.current

    def serve(self, mcp_out: int) -> None:
        """Answer MCP frames until stdin ends."""
        import anyio

        from jev_harness.mcp.gate import Gate, screened
        from jev_harness.mcp.stdio import bounded_stdio

        async def main() -> None:
            out = anyio.wrap_file(io.TextIOWrapper(os.fdopen(mcp_out, "wb"), encoding="utf-8"))
            server = self.front.server()
            gate = Gate(self.say, lambda: self.front.describe(server), self.front.cancel)
            async with (
                bounded_stdio(sys.stdin.buffer, out) as (read, write),
                screened(read, write, gate) as (requests, replies),
            ):
                await server.run(requests, replies, server.create_initialization_options())

        anyio.run(main)

    def stop(self, why: str) -> dict[str, Any]:
        """Settle a call in flight, write final, stop workers; once (a second caller waits)."""
        with self._stopping:
            if self.result is None:
                self.result = self._stop(why)
            return self.result

    def _stop(self, why: str) -> dict[str, Any]:
        if self.current is not None:
            self.current.engine.cancel.set()  # a delegated run stops between steps
        if not self.front.idle.wait(STOP_GRACE_S):
            self.say(f"{why}: the call in flight did not end; stopping the harness worker")
            engine = self.current.engine if self.current is not None else None
            if engine is not None:
                engine.harness.close()  # the operation becomes tool_uncertain, never re-run
            self.front.idle.wait(STOP_GRACE_S)
            if engine is not None and engine.final is None:  # not an operation (a domain, say)
                engine.finish("blocked", f"{why}: the harness worker was stopped mid-call")
        with self._opening:  # no session is created from here on
            self._ended = True
            session = self.current
        try:
            if session is None:
                self.pending.close()
                self.say(f"{why}: no tool was called, so no session was created")
                return {"status": None, "session_id": None}
            result: dict[str, Any] = session.close()
        finally:
            if self.archive is not None:
                self.archive.close()
        self.say(f"{why}: session {session.session_id} ended {result.get('status')}")
        return result


def run(argv: list[str], mcp_out: int, say: Any) -> int:
    args = parser().parse_args(argv)
    check_limits(args)
    if not args.direct_only and not os.environ.get("TYPESAFE_API_KEY", "").strip():
        raise Usage("not set: TYPESAFE_API_KEY (Jev runs delegated tasks; or use --direct-only)")
    json_arg("--inputs", args.inputs, obj=True)
    json_arg("--context", args.context, obj=False)
    archive = Archive(args.archive) if args.archive else None
    try:
        server = Server(args, archive, say)
    except BaseException:
        if archive is not None:
            archive.close()
        raise

    def on_signal(signum: int, frame: Any) -> None:
        def finish() -> None:
            server.stop(signal.Signals(signum).name)
            sys.stderr.flush()
            os._exit(0)  # the SDK's stdin reader thread cannot be interrupted

        threading.Thread(target=finish, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    say(f"serving {args.script} (pid {os.getpid()}); the session opens at the first tool call")
    try:
        server.serve(mcp_out)
    finally:
        server.stop("stdin closed")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the server; returns the exit status (0 after a clean stop, 2 if it cannot start)."""
    forbid_inspection()  # it holds the keys (its environment): before any child exists
    mcp_out = os.dup(sys.stdout.fileno())  # MCP frames only; fd 1 now goes to stderr
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    unusable = keys.load_or_error()  # before the redactor is made: it knows the stored keys too
    redactor = _redactor()

    def say(message: str) -> None:  # named as the program a user types, as its usage line is
        print(f"jev-harness-mcp: {redactor.text(message)}", file=sys.stderr, flush=True)

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(Redacting(redactor.text))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    logging.getLogger("mcp").setLevel(logging.ERROR)  # "tool not listed" for delegate is noise
    try:
        if unusable is not None:
            raise unusable
        return run(sys.argv[1:] if argv is None else list(argv), mcp_out, say)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except Usage as exc:
        say(str(exc))
        return 2
    except Exception as exc:
        from kernel.config.install import missing_dependency
        from kernel.errors import JmpError

        if isinstance(exc, JmpError):
            say(str(exc))
        else:
            say(missing_dependency(exc) or f"internal error: {type(exc).__name__}: {exc}")
        return 2


def entry() -> None:
    """`python -m jev_harness.mcp`: exit as soon as the session is settled.

    Everything is written and closed by then; skipping the interpreter's teardown of the SDK
    stack (seconds on a loaded machine) keeps the exit inside the grace MCP clients give a
    server after closing its stdin, before they kill its process group.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
