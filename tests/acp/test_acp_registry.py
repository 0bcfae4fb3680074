"""Issue 34 item 1: what the ACP registry checks, and terminal auth the way it defines it.

The registry lists an agent only when its `initialize` answer offers an auth method of type
`agent` or `terminal` (its AUTHENTICATION.md); its CI runs `verify_agents.py --auth-check`,
whose client (ported in tests/acp/registry/client.py) sends its own capabilities and judges
`authMethods`. jmp's entry (agent.json) must validate against the registry's schema.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
from acp import RequestError
from acp.schema import AuthCapabilities, ClientCapabilities

from kernel.config import keys
from tests.acp.helpers import acp_agent, check_acp_frame, run
from tests.acp.registry.client import INITIALIZE_PARAMS, run_auth_check
from tests.support.cli import FLASH_KEY, JEV_KEY, ROOT, Cli

REGISTRY = Path(__file__).resolve().parent / "registry"
BIN = Path(sys.executable).parent
KEYLESS = {"TYPESAFE_API_KEY": None, "FLASH_API_KEY": None, "DEEPSEEK_API_KEY": None}


def _registry_check(jmp: Cli, argv: list[str]) -> list[tuple[str, str]]:
    """verify_agents.py's auth check of ARGV as the registry runs it: no key anywhere, HOME an
    empty sandbox (so no key file either)."""
    sandbox = jmp.tmp / "auth-home"
    sandbox.mkdir(exist_ok=True)
    env = {k: v for k, v in jmp.env(**KEYLESS).items() if k != "XDG_CONFIG_HOME"}
    env["HOME"] = str(sandbox)
    found = run_auth_check(argv, jmp.tmp, {**env, "HOME": str(sandbox)}, timeout=120)
    assert found.success, found.error
    assert found.response is not None
    check_acp_frame(found.response, "initialize")  # the official schema, no unnamed field
    (method,) = found.response["result"]["authMethods"]
    assert method["args"] == ["--setup"] and method["type"] == "terminal"
    assert not (sandbox / ".config").exists()  # a look for keys writes nothing
    return [(m.id, m.type) for m in found.auth_methods]


def test_the_registry_auth_check_passes(jmp: Cli) -> None:
    """Failed before: jmp answered `authMethods: []` ("No authMethods in response")."""
    methods = _registry_check(jmp, [sys.executable, str(ROOT / "main.py"), "--acp"])
    assert methods == [("jmp-setup", "terminal")]


def test_the_registry_check_passes_on_what_uvx_runs(jmp: Cli) -> None:
    """`uvx jmp-agent --acp` (agent.json) runs the console script `jmp-agent` of the
    distribution `jmp-agent`."""
    script = BIN / "jmp-agent"
    assert script.exists(), "no console script jmp-agent: `make install` (pyproject scripts)"
    assert _registry_check(jmp, [str(script), "--acp"]) == [("jmp-setup", "terminal")]


def test_agent_json_is_a_valid_registry_entry() -> None:
    """agent.json validates against the registry's agent.schema.json (vendored), as its
    build_registry.py checks it, and agrees with pyproject.toml."""
    entry = json.loads((ROOT / "agent.json").read_text())
    schema = json.loads((REGISTRY / "agent.schema.json").read_text())
    jsonschema.validate(entry, schema, format_checker=jsonschema.FormatChecker())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert entry["id"] == "jmp" and entry["version"] == project["version"]
    uvx = entry["distribution"]["uvx"]
    name, _, pinned = uvx["package"].partition("==")
    assert name == project["name"] == "jmp-agent"
    assert pinned == project["version"]  # the registry refuses a pin that differs
    assert uvx["args"] == ["--acp"]
    assert project["scripts"]["jmp-agent"] == project["scripts"]["jmp"]  # what uvx runs
    assert entry["license"] == project["license"]


def test_a_terminal_method_only_for_a_client_that_runs_one(jmp: Cli) -> None:
    """The schema: a `terminal` method only when the client enabled terminal auth
    (`auth.terminal`); any other client gets the same method as an `agent` one."""

    async def scenario() -> None:
        async with acp_agent(jmp, env=jmp.env(**KEYLESS)) as agent:
            plain = await agent.conn.initialize(protocol_version=1)
            (method,) = plain.auth_methods
            assert method.id == "jmp-setup" and getattr(method, "type", None) is None
            able = ClientCapabilities(auth=AuthCapabilities(terminal=True))
            answer = await agent.conn.initialize(protocol_version=1, client_capabilities=able)
            (method,) = answer.auth_methods
            assert method.type == "terminal" and method.args == ["--setup"]

    run(scenario())


def test_session_new_without_keys_is_auth_required_until_the_setup_stored_them(
    jmp: Cli,
) -> None:
    """Failed before: -32001 (a jmp error). Now the schema's -32000 naming the method and the
    variables; once the key file holds the keys (as `jmp --setup` leaves it), the same process
    opens the session: it looks again, no restart."""

    async def scenario() -> None:
        async with acp_agent(jmp, env=jmp.env(**KEYLESS)) as agent:
            await agent.conn.initialize(protocol_version=1, **_registry_capabilities())
            with pytest.raises(RequestError) as refused:
                await agent.conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])
            assert refused.value.code == -32000
            assert "jmp-setup" in str(refused.value) and "TYPESAFE_API_KEY" in str(refused.value)
            assert refused.value.data["authMethods"] == ["jmp-setup"]
            with pytest.raises(RequestError) as still:
                await agent.conn.authenticate(method_id="jmp-setup")
            assert still.value.code == -32000
            assert not jmp.home.exists() or not any(jmp.home.iterdir())
            keys.write({keys.JEV: JEV_KEY, keys.FLASH: FLASH_KEY}, _key_file(jmp))
            await agent.conn.authenticate(method_id="jmp-setup")
            session = await agent.conn.new_session(cwd=str(jmp.workspace), mcp_servers=[])
            jmp.jev.script([{"route": "done"}, {"completion_review": "complete"}])
            jmp.flash.queue([{"text": "Set up."}])
            assert await agent.prompt(session.session_id, "hello") == "end_turn"
        stderr = agent.stderr.read_text()
        assert JEV_KEY not in stderr and FLASH_KEY not in stderr

    run(scenario())
    assert _bearers(jmp) == {JEV_KEY, FLASH_KEY}  # the file's keys reached both models


def _registry_capabilities() -> dict[str, ClientCapabilities]:
    caps = ClientCapabilities.model_validate(INITIALIZE_PARAMS["clientCapabilities"])
    return {"client_capabilities": caps}


def _key_file(jmp: Cli) -> Path:
    return keys.key_file({"XDG_CONFIG_HOME": str(jmp.config_home)})


def _bearers(jmp: Cli) -> set[str]:
    found = set()
    for request in jmp.jev.requests + jmp.flash.requests:
        header = request.get("headers", {}).get("Authorization", "")
        match = re.fullmatch(r"Bearer (.+)", header)
        if match:
            found.add(match.group(1))
    return found
