"""`initialize`, answered before the ACP SDK is loaded (issue 24 item 7).

Importing the SDK (its pydantic schema) takes seconds on a loaded machine, and an editor waits
for `initialize` before it sends anything else. So `jmp --acp` loads the SDK on a thread and,
meanwhile, answers each well-formed `initialize` itself with `result()`, the same answer
`JmpAcpAgent.initialize` gives once the SDK is there (it is built from this function). The
first other message (or a malformed `initialize`) is handed to the SDK when it is loaded.
No SDK import here: this module is on the path to the first answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp_server import auth

PROTOCOL_VERSION = 1  # the SDK's acp.PROTOCOL_VERSION (a unit test keeps them equal)
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)
MAX_VERSION = 65535  # the schema's ProtocolVersion is a uint16


def result(protocol_version: int, version: str, capabilities: Any = None) -> dict[str, Any]:
    """The InitializeResponse (JSON): the client's version if supported, else the latest (the
    spec's negotiation), and what jmp offers; its auth method is the one the client's
    capabilities (the JSON of `clientCapabilities`) can run (acp_server/auth.py)."""
    chosen = protocol_version if protocol_version in SUPPORTED_VERSIONS else PROTOCOL_VERSION
    return {
        "protocolVersion": chosen,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
        },
        "authMethods": auth.methods(capabilities),
        "agentInfo": {"name": "jmp", "title": "jmp", "version": version or "0"},
    }


def early_version(message: dict[str, Any]) -> int | None:
    """The protocol version of a well-formed `initialize` request, else None (the SDK then
    answers it, with its own validation errors)."""
    if message.get("method") != "initialize" or "id" not in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    return version if 0 <= version <= MAX_VERSION else None


async def answer_until_loaded(
    transport: Any, loading: asyncio.Future[Any], version: asyncio.Future[str]
) -> bool:
    """Answer `initialize` requests until the SDK is loaded or another message comes (pushed
    back for the SDK). False: the input ended first (nothing else to serve)."""
    while not loading.done():
        receiving = asyncio.ensure_future(transport.receive())
        await asyncio.wait({receiving, loading}, return_when=asyncio.FIRST_COMPLETED)
        if not receiving.done():
            transport.push_back(receiving)  # the SDK's first receive gets it
            return True
        message = receiving.result()
        if message is None:
            return False
        asked = early_version(message)
        if asked is None:
            transport.push_back(message)
            return True
        answer = result(asked, await version, message["params"].get("clientCapabilities"))
        await transport.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
    return True
