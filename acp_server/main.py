"""`jmp --acp`: serve ACP on stdio until stdin ends; exit 0 with every session released.

Stdout carries JSON-RPC only: the real stdout is moved to a private descriptor for the
transport's writer, and fd 1 is pointed at stderr, so a stray print (ours, a library's, an
inherited child's) cannot corrupt the stream. Every JSON-RPC line is read and written by
`acp_server.wire` (bounded, checked, redacted value by value); everything written to stderr goes
through a redactor that knows every secret of every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Any, cast

from kernel.store.redact import Redactor


class _RedactingFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__("jmp acp: %(levelname)s %(message)s")
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.text(super().format(record))


def serve(sessions_dir: str | None = None) -> int:
    """Run the ACP agent on this process's stdio; returns 0 on stdin EOF or SIGTERM."""
    from acp_server.sessions import Config
    from kernel.store.catalog import sessions_home

    out_fd = os.dup(1)  # non-inheritable: workers never hold the client's pipe open
    os.dup2(2, 1)
    config = Config(sessions_home(sessions_dir))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(config.log_redactor))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    with os.fdopen(out_fd, "wb", buffering=0) as out:
        asyncio.run(_serve(config, out))
    return 0


async def _serve(config: Any, out: Any) -> None:
    from acp import stdio_streams

    from acp_server.server import JmpAcpAgent
    from acp_server.wire import MAX_LINE_BYTES

    agent = JmpAcpAgent(config, version=_version(), warm=_warm())
    saved = sys.stdout
    sys.stdout = out  # only for the SDK's helper, which binds the pipe it is given
    try:
        reader, writer = await stdio_streams(limit=MAX_LINE_BYTES)
    finally:
        sys.stdout = saved
    await run_connection(agent, reader, writer, signals=(signal.SIGTERM, signal.SIGINT))


async def run_connection(
    agent: Any, reader: Any, writer: Any, signals: tuple[signal.Signals, ...] = ()
) -> None:
    """Serve one client on these streams until its input ends (or a signal), then cancel every
    run, wait for it, and release every session (JmpAcpAgent.shutdown)."""
    from acp import Agent, run_agent

    from acp_server.wire import StdioTransport

    transport = StdioTransport(reader, writer, agent.redactor_for)
    # The SDK's router answers "method not found" for the Agent methods jmp leaves out.
    serving = asyncio.ensure_future(run_agent(cast("Agent", agent), transport))
    loop = asyncio.get_running_loop()
    for sig in signals:
        loop.add_signal_handler(sig, serving.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await agent.shutdown()
        await transport.close()


def _warm() -> int:
    """JMP_ACP_WARM_SESSIONS: how many idle sessions keep their workers (default 4)."""
    from acp_server.server import WARM_SESSIONS

    raw = os.environ.get("JMP_ACP_WARM_SESSIONS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else WARM_SESSIONS


def _version() -> str:
    """jmp's version (kernel/config/install.py): the distribution "jmp" on PyPI is another
    project, whose version this reported when it was installed beside us."""
    from kernel.config.install import version

    return version()
