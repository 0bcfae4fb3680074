"""Run one CLI invocation that opens a session: new task, follow-up, replay, compact, ack."""

from __future__ import annotations

import gc
import os
import signal
import threading
from pathlib import Path
from typing import Any

SUCCESS = ("completed", "compacted")


def _servers(options: Any) -> Any:
    from kernel.config.mcp import load_servers

    return load_servers(enabled=not options.no_mcp)


def _install_interrupt(cancel: threading.Event) -> Any:
    """First Ctrl+C sets the cancel Event (honoured mid-stream); a second one aborts."""

    def handler(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()

    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (embedded use): the caller owns signals
        return None


def _note_nothing_pending(session: Any, printer: Any) -> None:
    """--ack-interrupted with nothing to acknowledge: say so; the run goes on as without it."""
    from kernel.store import pending

    if not pending.unsettled(session.events):
        printer.note(
            f"nothing to acknowledge: session {session.id} has no interrupted calls; "
            "continuing exactly as without --ack-interrupted (nothing is re-run)"
        )


def _early_router(options: Any, settings: Any, printer: Any) -> Any:
    """A run with a prompt always asks Jev first: its router is asked for before the kernel's
    heavier imports and the session, so its start overlaps them (issue 11). None when this run
    may need no model or lacks a key (the usual checks then report it, in the usual order)."""
    if options.prompt is None or options.compact:
        return None
    if not (settings.typesafe_api_key and settings.flash_api_key):
        return None
    from kernel.supervision.models import start_router

    # What it prints passes the printer's redactor, which becomes the session's once it opens.
    return start_router(settings, lambda text: printer.redactor.text(text))


def run(options: Any, printer: Any) -> int:
    """Drive the agent for one invocation; exit 0 for completed/compacted, else 2."""
    # The cyclic GC stays off while the kernel imports and opens the session: those
    # allocations are nearly all long-lived, and its 30 collections were 7-10% of a warm
    # start to the first Jev request (issue 11). Before the run begins, what start-up made
    # is frozen (never walked again) and the GC is on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from kernel.config.settings import Settings

        settings = Settings.environment()
        router = _early_router(options, settings, printer)
        try:
            return _drive(options, printer, settings, router, collecting)
        finally:
            if router is not None:
                router.close()  # a no-op once the Models that adopted it closed it
    finally:
        if collecting:
            gc.enable()


def _drive(options: Any, printer: Any, settings: Any, router: Any, collecting: bool) -> int:
    from kernel.loop.opening import Planned, open_agent
    from kernel.store.session import sessions_home
    from kernel.supervision.runtime import clean_stale_runtime_dirs
    from kernel.supervision.waits import add_listener

    clean_stale_runtime_dirs()  # a killed kernel's sockets under /tmp (issue 9, item 19)
    home = sessions_home(options.sessions_dir)
    printer.locate(home)
    cancel = threading.Event()
    given = options.workspace
    if options.session is None:
        given = given or os.getcwd()
    # "starting tools…" in the live view
    forget_waits = add_listener(getattr(printer, "worker_wait", lambda *_: None))
    previous = None
    agent = None
    try:
        agent = open_agent(
            home,
            settings,
            lambda: _servers(options),
            session_id=options.session,
            workspace=Path(given) if given else None,
            named=f"--workspace {options.workspace}",
            planned=Planned(options.prompt, options.compact),
            on_event=printer.event,
            secrets=printer.redactor.secrets,  # the printer's: every key variable that is set
            router=router,
            cancel=cancel,
        )
        # One redactor for every stream: the session's now knows the printer's secrets too.
        printer.redactor = agent.session.redactor
        agent.tools.on_output = printer.tool_output  # a running command's output, live view
        if options.ack_interrupted:
            _note_nothing_pending(agent.session, printer)
        previous = _install_interrupt(cancel)
        if collecting:
            gc.freeze()  # what start-up made lives on: later collections never walk it
            gc.enable()
        result = agent.run(
            prompt=options.prompt,
            compact=options.compact,
            acknowledge_pending=options.ack_interrupted,
        )
    finally:
        forget_waits()
        if agent is not None:
            agent.close()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    printer.result(result)
    return 0 if result["status"] in SUCCESS else 2
