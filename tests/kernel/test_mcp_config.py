"""kernel.config.mcp: the file is found, validated with field paths, and its secrets collected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kernel.config.mcp as mcp_config
from kernel.config.mcp import RemoteServer, StdioServer, load_servers
from kernel.errors import ConfigError

GOOD = {
    "mcpServers": {
        "fs": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": {"API_TOKEN": "tok-1234567890", "DEBUG": "1", "LOG": "true"},
            "cwd": "/tmp",
        },
        "web": {
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer abcdef123456", "X-Key": "key-987654"},
            "transport": "streamable-http",
        },
        "plain": {"command": "server"},
    }
}


@pytest.fixture(autouse=True)
def no_env_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's own config: env unset, default path empty."""
    monkeypatch.delenv(mcp_config.ENV_PATH, raising=False)
    default = tmp_path / "default" / "mcp.json"
    monkeypatch.setattr(mcp_config, "default_path", lambda: default)


def write(tmp_path: Path, document: object, name: str = "mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_happy_path_parses_stdio_and_remote_servers(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    servers = load_servers(path)
    assert servers and len(servers) == 3 and servers.path == path
    fs = servers.servers["fs"]
    assert isinstance(fs, StdioServer)
    assert fs.args == ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    assert fs.cwd == "/tmp" and fs.env["API_TOKEN"] == "tok-1234567890"
    web = servers.servers["web"]
    assert isinstance(web, RemoteServer) and web.transport == "streamable-http"
    plain = servers.servers["plain"]
    assert plain == StdioServer(command="server", args=[], env={}, cwd=None)


def test_to_json_round_trips_through_the_parser(tmp_path: Path) -> None:
    servers = load_servers(write(tmp_path, GOOD))
    again = load_servers(write(tmp_path, servers.to_json(), "again.json"))
    assert again.servers == servers.servers
    assert json.loads(servers.to_json())["mcpServers"]["plain"] == {"command": "server"}


def test_secrets_are_env_and_header_values_but_not_flags(tmp_path: Path) -> None:
    servers = load_servers(write(tmp_path, GOOD))
    assert set(servers.secrets) == {
        "tok-1234567890",
        "Bearer abcdef123456",
        "abcdef123456",  # the token alone, in case it shows up without its scheme
        "key-987654",
    }
    assert "tok-1234567890" not in repr(servers)


def test_type_is_accepted_as_the_transport_spelling(tmp_path: Path) -> None:
    document = {"mcpServers": {"a": {"url": "http://127.0.0.1:9/sse", "type": "sse"}}}
    server = load_servers(write(tmp_path, document)).servers["a"]
    assert isinstance(server, RemoteServer) and server.transport == "sse"
    document = {"mcpServers": {"b": {"command": "x", "type": "stdio"}}}
    assert isinstance(load_servers(write(tmp_path, document)).servers["b"], StdioServer)


def test_missing_default_file_means_no_servers() -> None:
    servers = load_servers()
    assert not servers and servers.servers == {} and servers.secrets == []
    assert servers.to_json() == '{"mcpServers":{}}'


def test_default_file_is_read_when_present(tmp_path: Path) -> None:
    mcp_config.default_path().parent.mkdir()
    mcp_config.default_path().write_text(json.dumps(GOOD))
    assert sorted(load_servers().servers) == ["fs", "plain", "web"]


def test_env_variable_selects_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mcp_config.ENV_PATH, str(write(tmp_path, GOOD)))
    assert len(load_servers()) == 3


def test_missing_configured_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=str(missing)):
        load_servers(missing)
    monkeypatch.setenv(mcp_config.ENV_PATH, str(missing))
    with pytest.raises(ConfigError, match=str(missing)):
        load_servers()


def test_disabled_reads_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mcp_config.ENV_PATH, str(write(tmp_path, "{broken")))
    servers = load_servers(enabled=False)
    assert not servers and servers.path is None


def server(**fields: object) -> dict[str, object]:
    return {"mcpServers": {"fs": fields}}


BROKEN = [
    ("{not json", "not valid JSON"),
    ([], "(top level): expected an object, got list"),
    ({}, "mcpServers: required field is missing"),
    ({"mcpServers": {}, "extra": 1}, "extra: unknown field"),
    ({"mcpServers": []}, "mcpServers: expected an object, got list"),
    ({"mcpServers": {"fs": "npx"}}, "mcpServers.fs: expected an object, got str"),
    (server(args=["a"]), "mcpServers.fs: missing command (stdio server) or url"),
    (server(command="x", url="http://h/"), "mcpServers.fs: give either command"),
    (server(command=3), "mcpServers.fs.command: expected str, got int"),
    (server(command=" "), "mcpServers.fs.command: must not be empty"),
    (server(command="x", args="a b"), "mcpServers.fs.args: expected a list of str"),
    (server(command="x", args=["a", 1]), "mcpServers.fs.args[1]: expected str, got int"),
    (server(command="x", env={"K": 5}), "mcpServers.fs.env.K: expected str, got int"),
    (server(command="x", env=["K=v"]), "mcpServers.fs.env: expected an object, got list"),
    (server(command="x", cwd=["/"]), "mcpServers.fs.cwd: expected str, got list"),
    (server(command="x", timeout=5), "mcpServers.fs.timeout: unknown field"),
    (server(command="x", type="sse"), 'mcpServers.fs.type: expected "stdio"'),
    (server(url="ftp://h/"), "mcpServers.fs.url: expected an http:// or https:// URL"),
    (server(url="http://h/", transport="ws"), "mcpServers.fs.transport: expected one of"),
    (server(url="http://h/", headers={"A": True}), "mcpServers.fs.headers.A: expected str"),
    (server(url="http://h/", env={}), "mcpServers.fs.env: unknown field"),
    # What no path, argument, environment entry or header can hold (JSON can spell it all).
    (server(command="x\x00y"), "mcpServers.fs.command: contains a NUL character"),
    (server(command="x", args=["a", "\ud800"]), "mcpServers.fs.args[1]: contains a lone surr"),
    (server(command="x", cwd="/tmp\x00"), "mcpServers.fs.cwd: contains a NUL character"),
    (server(command="x", env={"K": "v\x00"}), "mcpServers.fs.env.K: contains a NUL character"),
    (server(command="x", env={"K\udc80": "v"}), "mcpServers.fs.env name 'K\\udc80': contains"),
    (server(command="x", env={"A=B": "v"}), "'A=B' is not an environment variable name"),
    (server(command="x", env={"": "v"}), "'' is not an environment variable name"),
    (server(url="http://h/\nX: y"), "mcpServers.fs.url: contains a line break"),
    (server(url="http://h/", headers={"A": "b\r\nC: d"}), "headers.A: contains a line break"),
    ({"mcpServers": {"f\x00s": {"command": "x"}}}, "mcpServers name 'f\\x00s': contains a NUL"),
]


@pytest.mark.parametrize(("document", "message"), BROKEN)
def test_broken_file_names_file_and_field(tmp_path: Path, document: object, message: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as caught:
        load_servers(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_empty_server_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="server name must not be empty"):
        load_servers(write(tmp_path, {"mcpServers": {"": {"command": "x"}}}))


def test_kernel_module_imports_no_vendor_sdk() -> None:
    code = (
        "import sys, kernel.config.mcp\n"
        "bad = [m for m in ('mcp', 'openhands', 'openai', 'typesafe_sdk', 'fastmcp')"
        " if m in sys.modules]\n"
        "print(bad)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
