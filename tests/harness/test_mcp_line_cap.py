"""`jev-harness-mcp` reads stdin lines of at most the ACP transport's cap (issue 32 item 7).

A real server process is fed one 300 MiB line, streamed a MiB at a time: it answers -32600
with the request's id, never holds the line whole (its peak resident memory, /proc VmHWM, grows
by less than a third of the line), and goes on serving the next request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jmp_lab.servers.jev import JevServer
from protocol.lines import MAX_LINE_BYTES
from tests.harness.helpers import SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import McpServer, RawClient

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}
MIB = 1024 * 1024
LINE_MIB = 300
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "line-cap", "version": "1"},
}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def peak_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def stream_line(c: RawClient, head: bytes, mib: int) -> None:
    """One line of `head`, `mib` MiB of padding inside a JSON string, and its closing: written a
    MiB at a time (the server reads as the pipe fills)."""
    stdin = c.process.stdin
    assert stdin is not None
    stdin.write(head)
    pad = b"A" * MIB
    for _ in range(mib):
        stdin.write(pad)
    stdin.write(b'"}}}\n')
    stdin.flush()


def error_of(frame: dict[str, Any]) -> tuple[int, str]:
    assert "error" in frame, frame
    return frame["error"]["code"], frame["error"]["message"]


def test_a_300_mib_line_is_refused_unheld_and_the_server_goes_on(cli: HarnessCli) -> None:
    server = McpServer(cli, PICK, INPUTS, "--direct-only", key=False)
    with RawClient(server, timeout=900) as c:
        assert "result" in c.request("initialize", INIT)
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert [t["name"] for t in c.request("tools/list", {})["result"]["tools"]]
        before = peak_kib(c.process.pid)
        head = b'{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"observe",'
        stream_line(c, head + b'"arguments":{"pad":"', LINE_MIB)
        code, text = error_of(c.response(77))
        assert code == -32600, text
        assert f"{MAX_LINE_BYTES:,} bytes" in text, text
        # The next request is served: the line was skipped up to its newline, no further.
        listed = c.request("tools/list", {})
        assert [t["name"] for t in listed["result"]["tools"]] == ["observe", "arguments", "operate"]
        grown_mib = (peak_kib(c.process.pid) - before) / 1024
        assert grown_mib < LINE_MIB / 3, f"the server's peak memory grew {grown_mib:.0f} MiB"
        # A line over the cap whose id cannot be read is answered with the null id.
        stream_line(c, b'{"jsonrpc":"2.0","method":"tools/call","params":{"x":"', 17)
        code, _ = error_of(c.response(None))
        assert code == -32600
        observed = c.request("tools/call", {"name": "observe", "arguments": {}})["result"]
        assert observed["isError"] is False, observed
        assert c.close() == 0
    assert "discarded" in server.stderr  # said once per line on stderr, redacted
