"""The ACP registry's auth check, ported from agentclientprotocol/registry
`.github/workflows/client.py` (Apache License 2.0; see README.md beside this file).

Spawns the agent, sends the registry validator's `initialize` (raw JSON-RPC, newline-delimited,
no SDK: `_meta` fields are kept), parses `authMethods` and passes when at least one method has
type `agent` or `terminal`.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The registry validator's initialize params, verbatim.
INITIALIZE_PARAMS: dict[str, Any] = {
    "protocolVersion": 1,
    "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
    "clientCapabilities": {
        "terminal": True,
        "fs": {"readTextFile": True, "writeTextFile": True},
        "_meta": {"terminal_output": True, "terminal-auth": True},
    },
}


@dataclass
class AuthMethod:
    """Auth method with type inferred from _meta."""

    id: str
    name: str
    type: str | None = None
    description: str | None = None


@dataclass
class AuthCheckResult:
    """Result of auth verification."""

    success: bool
    auth_methods: list[AuthMethod] = field(default_factory=list)
    error: str | None = None
    response: dict[str, Any] | None = None  # (ours: the raw answer, for the test to look at)


def parse_auth_methods(auth_methods_raw: list[dict[str, Any]]) -> list[AuthMethod]:
    """Type detection priority: 1. the "type" field; 2. "_meta" keys "terminal-auth" ->
    "terminal", "agent-auth" -> "agent"; 3. "agent" (per AUTHENTICATION.md)."""
    auth_methods = []
    for method in auth_methods_raw:
        auth_type = method.get("type")
        if not auth_type:
            meta = method.get("_meta", {})
            if isinstance(meta, dict):
                if "terminal-auth" in meta:
                    auth_type = "terminal"
                elif "agent-auth" in meta:
                    auth_type = "agent"
        if not auth_type:
            auth_type = "agent"
        auth_methods.append(
            AuthMethod(
                id=method.get("id", ""),
                name=method.get("name", ""),
                type=auth_type,
                description=method.get("description"),
            )
        )
    return auth_methods


def validate_auth_methods(auth_methods: list[AuthMethod]) -> tuple[bool, str]:
    """Validate that at least one auth method has type 'agent' or 'terminal'."""
    if not auth_methods:
        return False, "No authMethods in response"
    valid_types = {"agent", "terminal"}
    methods_with_valid_type = [m for m in auth_methods if m.type in valid_types]
    if not methods_with_valid_type:
        types_found = [m.type for m in auth_methods]
        return False, f"No auth method with type 'agent' or 'terminal'. Found types: {types_found}"
    return True, f"Found {len(methods_with_valid_type)} valid auth method(s)"


def send_jsonrpc(proc: subprocess.Popen[str], method: str, params: dict[str, Any]) -> None:
    assert proc.stdin is not None
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()


def read_jsonrpc(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
    """The first line the agent writes (the registry reads exactly one: anything before the
    answer fails the check)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        return None
    line = proc.stdout.readline()
    if not line:
        return None
    answer: dict[str, Any] = json.loads(line)
    return answer


def run_auth_check(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60.0
) -> AuthCheckResult:
    """Verify an agent supports ACP authentication (HOME an empty sandbox unless given)."""
    full_env = os.environ.copy()
    full_env["TERM"] = "dumb"
    if env:
        full_env.update(env)
    if "HOME" not in (env or {}):
        full_env["HOME"] = tempfile.mkdtemp(prefix="acp-auth-check-")
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=full_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=0,
    )
    drain = threading.Thread(target=lambda: proc.stderr and proc.stderr.read(), daemon=True)
    drain.start()
    try:
        send_jsonrpc(proc, "initialize", INITIALIZE_PARAMS)
        response = read_jsonrpc(proc, timeout)
        if response is None:
            return AuthCheckResult(False, error=f"Timeout after {timeout}s waiting for initialize")
        if "error" in response:
            return AuthCheckResult(False, error=f"Agent error: {response['error']}")
        result = response.get("result", {})
        auth_methods = parse_auth_methods(result.get("authMethods", []))
        is_valid, message = validate_auth_methods(auth_methods)
        return AuthCheckResult(
            is_valid, auth_methods, None if is_valid else message, response=response
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join(10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
