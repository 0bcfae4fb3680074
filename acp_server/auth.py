"""ACP authentication: the one method jmp offers (its interactive setup) and the answer to a
session that needs keys jmp does not have.

The method, `jmp-setup`, runs `jmp --setup` (cli/setup.py: it asks for the Jev and Flash keys,
checks them, stores them in the key file). As the ACP registry defines terminal auth
(https://github.com/agentclientprotocol/registry/blob/main/AUTHENTICATION.md) it is a
`terminal` method whose `args` start the setup in the agent's own program: offered so to a
client that says it can run one (`clientCapabilities.auth.terminal`, or the registry's and
Zed's `_meta["terminal-auth"]`), with `_meta["terminal-auth"]` (command, args, label) too for
clients that read that form; to any other client it is an `agent` method whose `authenticate`
looks again for keys (the person ran `jmp --setup` elsewhere). `session/new` without the keys
answers the schema's "Authentication required" (-32000) naming the method and what is missing.
No SDK import: the early `initialize` (acp_server/hello.py) is built from here.
"""

from __future__ import annotations

import sys
from typing import Any

METHOD_ID = "jmp-setup"
SETUP_ARGS = ["--setup"]
AUTH_REQUIRED = -32000  # the schema's ErrorCode "Authentication required"
NAME = "Set up jmp's keys"
TERMINAL_DESCRIPTION = (
    "Runs `jmp --setup` in a terminal: it asks for the Jev key (TYPESAFE_API_KEY) and the "
    "Flash or DeepSeek key, checks each with its service and stores them in "
    "~/.config/jmp/keys.json (readable by you alone). Environment variables still win."
)
AGENT_DESCRIPTION = (
    "Run `jmp --setup` in a terminal (it asks for the Jev key and the Flash or DeepSeek key and "
    "stores them), or set TYPESAFE_API_KEY and FLASH_API_KEY; then choose this to go on."
)


def client_runs_terminals(capabilities: Any) -> bool:
    """Did the client say it can run a terminal auth method? `auth.terminal` (the schema) or
    `_meta["terminal-auth"]` (what the registry's client.py and Zed send)."""
    if not isinstance(capabilities, dict):
        return False
    auth = capabilities.get("auth")
    meta = capabilities.get("_meta")
    by_schema = isinstance(auth, dict) and auth.get("terminal") is True
    by_meta = isinstance(meta, dict) and bool(meta.get("terminal-auth"))
    return by_schema or by_meta


def methods(capabilities: Any) -> list[dict[str, Any]]:
    """The `authMethods` of the InitializeResponse for a client with these capabilities (the
    JSON of `clientCapabilities`, or None)."""
    if not client_runs_terminals(capabilities):
        return [{"id": METHOD_ID, "name": NAME, "description": AGENT_DESCRIPTION}]
    legacy = {"command": sys.executable, "args": [_program(), *SETUP_ARGS], "label": NAME}
    return [
        {
            "id": METHOD_ID,
            "name": NAME,
            "description": TERMINAL_DESCRIPTION,
            "type": "terminal",
            "args": list(SETUP_ARGS),
            "env": {},
            "_meta": {"terminal-auth": legacy},
        }
    ]


def _program() -> str:
    """main.py of this copy: `python main.py --setup` runs the setup whatever launched us."""
    from kernel.config.install import PROJECT

    return str(PROJECT / "main.py")


def required(missing: str) -> tuple[int, str, dict[str, Any]]:
    """The JSON-RPC error (code, message, data) of a request that needs keys jmp lacks."""
    message = (
        f"Authentication required: {missing}. Authenticate with {METHOD_ID!r} "
        "(`jmp --setup` in a terminal), or set the variables"
    )
    return AUTH_REQUIRED, message, {"authMethods": [METHOD_ID], "reason": missing}
