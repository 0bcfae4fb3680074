"""Issue 9 items 2-5, 13, 16 through the real CLI: what leaves jmp, and what a shell can reach.

Every key variable that is set is a secret (used or not); the `result` line, the readable view
and error messages are redacted; the shell sees no key, no kernel pid and no MCP config, and
cannot read the kernel's or the model workers' environment (checked as an ordinary user would
run jmp: as root, with every capability dropped through setpriv, since root ignores the
non-dumpable flag); whatever a worker or an MCP server prints passes the session's redactor.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.servers.flash import FlashServer
from tests.servers.jev import JevServer
from tests.support.cli import ROOT, Cli, Run, json_lines, session_bytes, short_dir, tool_call

# None of them matches a token format, so only the known-secret path can redact them.
KEYS = {
    "TYPESAFE_API_KEY": "jevkey-Pz81Ka0Qn5VbT3",
    "FLASH_API_KEY": "flashkey-7Hq2Lm9Xw4Rt",
    "DEEPSEEK_API_KEY": "deepkey-Ux3Yo6Ee2WdM8",  # set beside FLASH_API_KEY: unused, still secret
    "CAMOFOX_ACCESS_KEY": "foxkey-Jr5Nt0Bc7Gs2",
}
MCP_ENV_SECRET = "mcpenv-Lk4Ws8Qa1Zx6"
MCP_ARG_SECRET = "mcparg-Vb2Nm7Hj3Kq9"
ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31mred\x9b1m"


@pytest.fixture
def cli() -> Iterator[Cli]:
    tmp = short_dir()
    with JevServer() as jev, FlashServer() as flash:
        yield Cli(tmp, jev, flash)
    shutil.rmtree(tmp, ignore_errors=True)


def _env(cli: Cli, **changes: str | None) -> dict[str, str]:
    return cli.env(**{**KEYS, **changes})


def _bodies(cli: Cli) -> str:
    """Every model request body (the Authorization headers carry the keys by design)."""
    return json.dumps([r["body"] for r in cli.jev.requests + cli.flash.requests], default=str)


def _assert_no_key(cli: Cli, *runs: Run, sid: str | None = None) -> None:
    everything = "".join(run.stdout + run.stderr for run in runs) + _bodies(cli)
    stored = session_bytes(cli.home / sid).decode("utf-8", "replace") if sid else ""
    for name, key in KEYS.items():
        assert key not in everything, f"{name} leaked to stdout, stderr or a model request"
        assert key not in stored, f"{name} leaked into the session's files"


def test_every_key_is_redacted_from_the_result_line_the_view_and_replay(cli: Cli) -> None:
    """Items 2, 3 (every key variable), 13: the answer carries all four keys and escapes."""
    answer = "keys: " + " ".join(KEYS.values())
    cli.jev.script([{"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([{"text": answer}])
    run = cli.run("--workspace", str(cli.workspace), "--no-mcp", "say hi", env=_env(cli))
    assert run.code == 0, run.stderr[-3000:]
    sid = run.result["session_id"]
    assert run.result["summary"].count("[REDACTED]") == 4
    assert run.of("final")[-1]["summary"] == run.result["summary"]
    replay = cli.run("--session", sid, env=_env(cli))
    assert replay.code == 0 and replay.result["summary"] == run.result["summary"]
    # the readable view: an `ask` question with the keys and terminal escape sequences
    cli.jev.script([{"route": "ask"}])
    cli.flash.queue([{"text": f"which one? {answer} {ESCAPES} done"}])
    view = cli.run("--session", sid, "and now?", env=_env(cli), json_flag=False)
    assert view.code == 2, view.stderr[-3000:]
    assert "[REDACTED]" in view.stdout and "which one?" in view.stdout
    assert "\x1b" not in view.stdout + view.stderr and "\x07" not in view.stdout
    assert "\x9b" not in view.stdout and "\\x1b]0;pwned-title\\x07" in view.stdout
    _assert_no_key(cli, run, replay, view, sid=sid)


@pytest.mark.parametrize(
    "given", ["../../etc/passwd", KEYS["FLASH_API_KEY"], "0" * 31 + "g", "/tmp", " "]
)
def test_an_invalid_session_id_is_never_echoed(cli: Cli, given: str) -> None:
    """Items 16 and 2: the result line says null; the error on stderr names no key."""
    run = cli.run("--session", given, env=_env(cli))
    assert run.code == 2 and run.result["status"] == "error"
    assert run.result["session_id"] is None and run.lines[-1]["session_id"] is None
    assert run.stderr.strip()
    _assert_no_key(cli, run)
    readable = cli.run("--session", given, env=_env(cli), json_flag=False)
    assert readable.code == 2
    _assert_no_key(cli, readable)


# ---- the shell's reach (items 3, 4, 5) ----------------------------------------------------

# Walks its parent chain and every /proc entry it may read, and prints what it found only
# base64-encoded (no redactor can see that), plus its own environment and the MCP server's
# command line in the clear. One line: OpenHands refuses several commands at once.
SNOOP = " ".join(
    [
        "D=$(mktemp); {",
        'echo "ENV:"; env;',
        'p=$$; while [ "${p:-1}" -gt 1 ]; do',
        'echo "PID $p"; cat /proc/$p/environ; echo;',
        "p=$(awk '/^PPid:/ {print $2}' /proc/$p/status);",
        "done;",
        'for f in /proc/[0-9]*/environ; do cat "$f"; echo; done;',
        '} > "$D" 2>&1;',
        'echo "B64 $(base64 -w0 "$D")";',
        'echo "RAWENV"; env;',
        "echo CMDLINES; for f in /proc/[0-9]*/cmdline;",
        "do tr '\\0' ' ' < \"$f\" 2>/dev/null | grep -a mcp_server; done;",
        'rm -f "$D"',
    ]
)


def _as_ordinary_user(argv: list[str]) -> list[str]:
    """Root ignores the non-dumpable flag: drop every capability, as an ordinary user has none."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot run jmp as an ordinary user")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--", *argv]


def _mcp_config(cli: Cli) -> None:
    server = {
        "command": sys.executable,
        "args": [
            str(ROOT / "tests" / "fakes" / "mcp_server.py"),
            f"--api-key={MCP_ARG_SECRET}",
            "--note",
            KEYS["FLASH_API_KEY"],  # a careless config: the model key as a plain argument
        ],
        "env": {"NOTES_TOKEN": MCP_ENV_SECRET, "FAKE_MCP_STDERR_ARGS": "1"},
    }
    (cli.tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": server}}))


def _encoded(key: str) -> list[str]:
    """Alignment-free pieces of the key's hex and base64 forms."""
    raw = key.encode()
    forms = [raw.hex()]
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + raw).decode()
        forms.append(text[4 if offset else 0 : -4])
    return forms


def _decoded_dump(output: str) -> bytes:
    (line,) = [line for line in output.splitlines() if line.startswith("B64 ")]
    return base64.b64decode(line[4:])


@pytest.mark.timeout(400)
def test_the_shell_reaches_no_key_no_kernel_and_no_mcp_config(cli: Cli) -> None:
    _mcp_config(cli)
    cli.jev.script([{"route": "bash"}, {"route": "done"}, {"completion_review": "complete"}])
    cli.flash.queue([tool_call(command=SNOOP), {"text": "Looked around."}])
    argv = [sys.executable, str(ROOT / "main.py"), "--json", "--workspace", str(cli.workspace)]
    done = subprocess.run(
        _as_ordinary_user([*argv, "look around"]),
        cwd=cli.workspace,
        # No shared warm pool: one started from here would keep our dropped capabilities.
        env=_env(cli, JMP_WARM="0"),
        capture_output=True,
        text=True,
        timeout=380,
        stdin=subprocess.DEVNULL,
    )
    run = Run(done.returncode, done.stdout, done.stderr, json_lines(done.stdout))
    assert run.code == 0, run.stderr[-3000:]
    sid = run.result["session_id"]
    finished = run.of("tool_finished")[0]
    assert finished["tool"] == "bash" and finished["exit_code"] == 0, finished
    output = (cli.home / sid / finished["full_output"]).read_text()
    dump = _decoded_dump(output)
    # the snoop worked: it read its own chain up to the kernel (and the MCP server's env)
    assert b"ENV:" in dump and b"PID " in dump and MCP_ENV_SECRET.encode() in dump
    for name, key in KEYS.items():
        assert key.encode() not in dump, f"the shell read {name}"
    shell_env = output.split("RAWENV", 1)[1].split("CMDLINES", 1)[0]
    for name in (*KEYS, "JMP_KERNEL_PID", "JMP_MCP_SERVERS"):
        assert name not in shell_env and name.encode() not in dump, f"{name} is in the shell's env"
    # the MCP server's own command line is readable, and redacted: --api-key and the careless
    # --note (the Flash key) alike; the server logged its arguments on jmp's stderr, redacted
    assert "--api-key=[REDACTED]" in output and "--note [REDACTED]" in output
    assert "fake mcp server: argv=" in run.stderr
    _assert_no_key(cli, run, sid=sid)
    everything = run.stdout + run.stderr + _bodies(cli)
    everything += session_bytes(cli.home / sid).decode("utf-8", "replace")
    assert MCP_ARG_SECRET not in everything and MCP_ENV_SECRET not in everything
    for key in KEYS.values():
        for form in _encoded(key):
            assert form not in everything, "an encoded key left the shell"
