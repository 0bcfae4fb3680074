"""A tool worker with MCP servers is forked by the warm pool too: its config (secrets included)
reaches it on a pipe of the kernel's whose read end rides with the spawn request, so the pool
forks it without ever seeing the config's bytes."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import psutil
import pytest

from host import confinement as C
from host import pool as H
from jmp_lab.servers import MCP_SERVER
from kernel.supervision import pool_client
from protocol import pool as P
from tests.support.warm import children_of, private_pool, suite_pool

FAKE = MCP_SERVER
SECRET = "warm-mcp-secret-4815162342"


@pytest.mark.timeout(300)  # a cold OpenHands import when the suite runs cold
def test_a_tool_worker_with_mcp_servers_is_forked_and_its_mcp_calls_work(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, warm_pool_of_this_session: Path
) -> None:
    """Forked by the suite's pool (every kind preloaded, as a user's pool is); its log is read
    from where it stood before this test."""
    from kernel.config.mcp import load_servers
    from kernel.supervision.tools import Tools

    server = {"command": sys.executable, "args": [FAKE], "env": {"FAKE_TOKEN": SECRET}}
    (short_tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"fx": server}}))
    (short_tmp / "ws").mkdir()
    monkeypatch.setenv("JMP_WARM", "1")
    pool_pid = suite_pool(warm_pool_of_this_session)
    log_path = H.view_dir(warm_pool_of_this_session, C.own_view_key()) / "pool.log"
    log_before = log_path.read_text() if log_path.exists() else ""
    tools = Tools(short_tmp / "ws", short_tmp / "terminal", load_servers(short_tmp / "mcp.json"))
    try:
        names = {spec.name: spec for spec in tools.specs()}
        assert names["mcp.echo"].source == "mcp:fx"
        assert tools.run("c1", "mcp.echo", {"text": "through the pool"}).text == (
            "through the pool"
        )
        assert tools.run("c2", "mcp.getenv", {"name": "FAKE_TOKEN"}).text == SECRET
        worker = psutil.Process(tools.worker.pid)
        assert worker.ppid() == pool_pid  # forked, not a cold child of this kernel
        assert worker.ppid() != os.getpid()
        # the config came on stdin, never in the environment (shells inherit that)
        assert SECRET not in json.dumps(worker.environ())
        assert not os.path.exists(f"/proc/{worker.pid}/fd/0") or (
            os.readlink(f"/proc/{worker.pid}/fd/0") == os.devnull
        )  # the worker let go of the pipe: no shell inherits it
    finally:
        tools.close()
    log = log_path.read_text()
    assert log.startswith(log_before)
    log = log[len(log_before) :]
    assert "forked workers.tool" in log
    assert SECRET not in log and "mcpServers" not in log


@pytest.mark.parametrize(("stdin", "sent"), [(True, 3), (False, 4)])
def test_a_spawn_whose_fds_do_not_match_its_stdin_flag_is_refused(stdin: bool, sent: int) -> None:
    with private_pool() as pool, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(pool.sock))
        request = P.Spawn(
            fingerprint=H.code_fingerprint(),
            module="tests.fakes.worker",
            argv=["ipc:///nowhere"],
            cwd="/",
            stdin=stdin,
        )
        null = os.open(os.devnull, os.O_RDWR)
        try:
            socket.send_fds(sock, [P.encode(request)], [null] * sent)
        finally:
            os.close(null)
        reply = pool_client.read_frame(sock)
        assert isinstance(reply, P.Refused) and reply.code == "bad_request"
        assert f"{sent} fds" in reply.detail
        assert not children_of(pool.pid)
