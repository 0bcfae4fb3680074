"""`jmp --acp`: serve ACP on stdio until stdin ends; exit 0 with every session released.

Stdout carries JSON-RPC only: the real stdout is moved to a private descriptor for the
transport's writer, and fd 1 is pointed at stderr, so a stray print (ours, a library's, an
inherited child's) cannot corrupt the stream. Every JSON-RPC line is read and written by
`acp_server.wire` (bounded, checked, redacted value by value); everything written to stderr goes
through a redactor that knows every secret of every session.

The ACP SDK loads on a thread while `initialize` is answered without it (acp_server/hello.py).
At the end of input or on SIGTERM every request in flight gets its response before the exit
(acp_server/wire.py); a second SIGTERM stops at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import sys
import threading
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
    from acp_server.config import Config, load_turns, warm_sessions  # no SDK import yet
    from kernel.store.catalog import sessions_home

    out_fd = os.dup(1)  # non-inheritable: workers never hold the client's pipe open
    os.dup2(2, 1)
    # A bad value: exit 2 naming it (on stderr: stdout is the client's), before serving.
    warm_sessions(), load_turns()
    config = Config(sessions_home(sessions_dir))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(config.log_redactor))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    with os.fdopen(out_fd, "wb", buffering=0) as out:
        asyncio.run(_serve(config, out))
    return 0


async def _serve(config: Any, out: Any) -> None:
    from acp_server.hello import answer_until_loaded
    from acp_server.wire import MAX_LINE_BYTES, StdioTransport

    version: concurrent.futures.Future[str] = concurrent.futures.Future()
    loading = _load_agent_class(version)
    reader, writer = await _stdio(out, MAX_LINE_BYTES)
    transport = StdioTransport(reader, writer, lambda _session: config.redactor)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, transport.end)
    loop.add_signal_handler(signal.SIGINT, transport.end)
    try:
        named = asyncio.wrap_future(version)
        if not await answer_until_loaded(transport, loading, named):
            return  # the input ended: nothing else to serve
        agent_class = await loading
        agent = agent_class(config, version=await named, warm=_warm())
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    await serve_transport(agent, transport, signals=(signal.SIGTERM, signal.SIGINT))


async def run_connection(
    agent: Any, reader: Any, writer: Any, signals: tuple[signal.Signals, ...] = ()
) -> None:
    """Serve one client on these streams (see `serve_transport`)."""
    from acp_server.wire import StdioTransport

    await serve_transport(agent, StdioTransport(reader, writer, agent.redactor_for), signals)


async def serve_transport(
    agent: Any, transport: Any, signals: tuple[signal.Signals, ...] = ()
) -> None:
    """Serve one client until its input ends (or a signal): every run is cancelled and every
    request in flight answered first (acp_server/wire.py), then every session is released
    (JmpAcpAgent.shutdown). A second signal stops at once."""
    from acp import Agent, run_agent

    transport.redactor_for = agent.redactor_for
    transport.on_end = agent.stop_runs
    transport.on_opened = agent.opened
    # The SDK's router answers "method not found" for the Agent methods jmp leaves out. Its
    # "unstable" flag only lifts its gate on session/resume and session/close (stable in the
    # schema it was generated from, 1.19): jmp serves no other method the flag would route.
    serving = asyncio.ensure_future(
        run_agent(cast("Agent", agent), transport, use_unstable_protocol=True)
    )
    loop = asyncio.get_running_loop()

    def stop() -> None:
        if transport.ending:
            serving.cancel()
        else:
            transport.end()

    for sig in signals:
        loop.add_signal_handler(sig, stop)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await agent.shutdown()
        await transport.close()


def _load_agent_class(version: concurrent.futures.Future[str]) -> asyncio.Future[Any]:
    """jmp's version, then `JmpAcpAgent` (the ACP SDK with it), imported on a daemon thread
    (an exit before they are needed does not wait for them)."""
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def load() -> None:
        version.set_result(_version())
        try:
            from acp_server.server import JmpAcpAgent

            done.set_result(JmpAcpAgent)
        except BaseException as exc:
            done.set_exception(exc)

    threading.Thread(target=load, name="acp-sdk-import", daemon=True).start()
    return asyncio.wrap_future(done)


async def _stdio(out: Any, limit: int) -> tuple[asyncio.StreamReader, Any]:
    """Streams on stdin and the private stdout, without the SDK. A stdin or stdout that is no
    pipe (a regular file) is read by a thread, written directly."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:
        _feed_from_thread(loop, reader)
    protocol = asyncio.streams.FlowControlMixin()
    try:
        transport, _ = await loop.connect_write_pipe(lambda: protocol, out)
    except ValueError:
        return reader, _FileWriter(out)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


class _FileWriter:
    """A StreamWriter's write/drain/close on a file that is no pipe (writes block, briefly)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def write(self, data: bytes) -> None:
        self.out.write(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    def feed() -> None:
        try:
            stdin: Any = sys.stdin.buffer  # a BufferedReader (read1), whatever typeshed says
            while chunk := stdin.read1(65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=feed, name="acp-stdin", daemon=True).start()


def _warm() -> int:
    from acp_server.config import warm_sessions

    return warm_sessions()  # checked at the start (serve)


def _version() -> str:
    """jmp's version (kernel/config/install.py): the distribution "jmp" on PyPI is another
    project, whose version this reported when it was installed beside us."""
    from kernel.config.install import version

    return version()
