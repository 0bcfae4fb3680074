"""How the tool worker starts and stops stdio MCP servers: the launcher, the token, the kill.

Stdio servers are children of the tool worker: mcp starts each in a new session (so it can
killpg the server's own subtree), and our launcher sets PR_SET_PDEATHSIG so a server dies with
the thread that started it, even when the worker is killed with SIGKILL. After `kill`, none of
the processes given is alive.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psutil
from mcp.client.stdio import StdioServerParameters

if TYPE_CHECKING:  # OpenHands' package init pulls in litellm (seconds): loaded when needed
    from openhands.sdk.mcp import MCPServer
    from openhands.sdk.mcp.client import MCPClient

    from workers.mcp.modern import HttpTarget, ModernClient

from host.spawn import TOKEN_ENV as TREE_TOKEN_ENV
from protocol.mcp_config import RemoteServer, ServerConfig, StdioServer
from workers import reaper

CLOSE_TIMEOUT_S = 5.0  # per server; mcp itself waits 2 s after closing stdin, then kills
TOKEN_VAR = "JMP_MCP_TOOLSET"  # marks our servers' environment so close() can find them

# Runs as `python -I -S -c LAUNCH PPID COMMAND ARGS...` and becomes COMMAND (same pid).
# PR_SET_PDEATHSIG (1) fires when the starting thread dies, so a SIGKILLed worker leaves no
# server behind; the ppid check closes the race where the worker died before prctl ran.
LAUNCH = """\
import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot start MCP server {sys.argv[2]!r}: {exc.strerror}\\n")
    os._exit(127)
"""


def sdk_server(spec: ServerConfig, token: str) -> MCPServer:
    """The SDK's server config for `spec`; a stdio server runs under LAUNCH, marked by token."""
    from openhands.sdk.mcp import MCPServer

    if isinstance(spec, RemoteServer):
        remote = {"url": spec.url, "headers": spec.headers or None, "transport": spec.transport}
        return MCPServer.model_validate(remote)
    params = stdio_params(spec, token)
    stdio = {"command": params.command, "args": params.args, "env": params.env, "cwd": spec.cwd}
    return MCPServer.model_validate(stdio)


def is_sse(spec: RemoteServer) -> bool:
    """Whether a remote server is reached over the old HTTP+SSE transport (2024-11-05), as the
    SDK decides: `transport: sse`, or none given and a URL path with an `/sse` segment."""
    if spec.transport is not None:
        return spec.transport == "sse"
    return re.search(r"/sse(/|$)", urlsplit(spec.url).path) is not None


def http_target(spec: RemoteServer) -> HttpTarget:
    """How a remote server is reached at MCP 2026-07-28: its URL and its config's headers."""
    from workers.mcp.modern import HttpTarget

    return HttpTarget(url=spec.url, headers=dict(spec.headers))


def stdio_params(spec: StdioServer, token: str) -> StdioServerParameters:
    """How a stdio server starts, whichever client speaks to it: under LAUNCH, marked by token."""
    env = {**spec.env, TOKEN_VAR: token}
    # mcp hands a stdio server only a minimal environment: pass on the kernel's tree token
    # so its process-tree net finds our servers too.
    if os.environ.get(TREE_TOKEN_ENV):
        env[TREE_TOKEN_ENV] = os.environ[TREE_TOKEN_ENV]
    path = env.get("PATH", os.environ.get("PATH"))
    if shutil.which(spec.command, path=path) is None and not os.path.isfile(spec.command):
        raise FileNotFoundError(f"command not found: {spec.command}")
    command, args = spec.command, list(spec.args)
    if sys.platform.startswith("linux"):
        launch = [sys.executable, "-I", "-S", "-c", LAUNCH, str(os.getpid())]
        command, args = launch[0], [*launch[1:], spec.command, *spec.args]
    return StdioServerParameters(command=command, args=args, env=env, cwd=spec.cwd)


def server_procs(token: str) -> list[psutil.Process]:
    """The live stdio server processes marked with `token`, as psutil handles that remember
    their create time, so a pid the system reused meanwhile is never signalled."""
    procs = []
    for child in psutil.Process().children():
        try:
            if child.environ().get(TOKEN_VAR) == token:
                procs.append(child)
        except (psutil.Error, OSError):
            continue  # exited or a zombie: nothing to find or kill
    return procs


def close_client(client: MCPClient | ModernClient) -> None:
    """Close one SDK client; best effort: `kill` makes sure nothing survives it."""
    with contextlib.suppress(Exception):
        client.sync_close()


def kill(procs: list[psutil.Process]) -> None:
    """SIGKILL each server's process group (mcp made each server a group leader). A server that
    already exited may have been reaped and its pid reused by an unrelated process (another
    jmp kernel among them): psutil's create-time check keeps such a pid untouched."""
    reaper.kill(procs, groups=True, wait_s=CLOSE_TIMEOUT_S)
