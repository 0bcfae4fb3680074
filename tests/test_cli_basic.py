"""CLI: usage errors exit 2 and create nothing; --list; the printer's JSON lines and live view."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from cli.printer import Printer, render
from kernel.store.event_log import EventLog
from kernel.store.session import Session
from protocol.events import FinalData, ModelProgressData, UserData
from tests.support.cli import json_line, json_lines
from tests.test_import_graph import SHARED_LEAF

ROOT = Path(__file__).resolve().parent.parent
BASIC = Path(__file__).resolve().parent / "data" / "events" / "v1" / "basic.jsonl"
VENDOR = ("openhands", "openai", "typesafe_sdk", "mcp", "zmq")


def jmp(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None):
    """`python main.py ARGS` in a real process."""
    full_env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / "main.py"), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def home(short_tmp: Path) -> Path:
    return short_tmp / "sessions"


@pytest.fixture
def session_id(home: Path, short_tmp: Path) -> str:
    (short_tmp / "ws").mkdir()
    with Session.create(home, short_tmp / "ws") as s:
        s.append(UserData(text="first task"))
        s.append(FinalData(status="completed", summary="done"))
        return s.id


def _snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


USAGE_ERRORS = {
    "nothing": [],
    "json-only": ["--json"],
    "empty-prompt": ["--json", "  "],
    "compact-with-prompt": ["--json", "--session", "SID", "--compact", "do it"],
    "compact-without-session": ["--json", "--compact"],
    "ack-without-session": ["--json", "--ack-interrupted", "go on"],
    "list-with-prompt": ["--json", "--list", "task"],
    "list-with-session": ["--json", "--list", "--session", "SID"],
    "list-with-no-mcp": ["--json", "--list", "--no-mcp"],
    "unknown-session": ["--json", "--session", "0" * 32, "more"],
    "malformed-session": ["--json", "--session", "../etc", "more"],
    "missing-workspace": ["--json", "--workspace", "WS/nope", "task"],
    "file-workspace": ["--json", "--workspace", "WS/file.txt", "task"],
    "other-workspace": ["--json", "--session", "SID", "--workspace", "WS/other", "more"],
    "unknown-flag": ["--json", "--frobnicate", "task"],
    "flag-missing-value": ["--json", "--session"],
    "no-json-nothing": ["--workspace", "WS"],
}


@pytest.mark.parametrize("case", USAGE_ERRORS)
def test_usage_errors_exit_2_and_create_nothing(case, home, session_id, short_tmp):
    (short_tmp / "other").mkdir()
    (short_tmp / "file.txt").write_text("x")
    args = [a.replace("SID", session_id).replace("WS", str(short_tmp)) for a in USAGE_ERRORS[case]]
    before = _snapshot(short_tmp)
    proc = jmp(*args, "--sessions-dir", str(home), cwd=short_tmp)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("jmp: error: ") and len(proc.stderr.splitlines()) == 1
    assert _snapshot(short_tmp) == before
    if "--json" in args:
        [line] = proc.stdout.splitlines()
        result = json_line(line)
        assert (result["kind"], result["seq"], result["version"]) == ("result", None, 1)
        assert result["data"]["status"] == "error" and result["data"]["summary"]
        assert set(result["data"]) == {"session_id", "status", "summary", "session_dir"}
    else:
        assert proc.stdout == ""


def test_usage_error_does_not_create_the_sessions_dir(short_tmp):
    missing = short_tmp / "never"
    proc = jmp("--json", "--compact", "--sessions-dir", str(missing))
    assert proc.returncode == 2 and not missing.exists()
    proc = jmp("--json", "--list", env={"JMP_SESSIONS_DIR": str(missing)})
    assert proc.returncode == 0 and not missing.exists()


def test_list_json_on_an_empty_dir(home):
    proc = jmp("--json", "--list", "--sessions-dir", str(home))
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stdout.splitlines()
    message = json_line(line)
    assert {k: message[k] for k in ("version", "session_id", "seq", "kind")} == {
        "version": 1,
        "session_id": None,
        "seq": None,
        "kind": "sessions",
    }
    assert message["data"] == {"sessions": []}
    assert proc.stderr == ""


def test_list_json_and_table_on_a_populated_dir(home, session_id, short_tmp):
    proc = jmp("--list", "--json", env={"JMP_SESSIONS_DIR": str(home)})
    [line] = proc.stdout.splitlines()
    [row] = json_line(line)["data"]["sessions"]
    assert row["session_id"] == session_id and row["status"] == "completed"
    assert row["title"] == "first task" and row["events"] == 3
    assert row["workspace"] == str((short_tmp / "ws").resolve())
    assert isinstance(row["last_activity"], float)
    table = jmp("--list", "--sessions-dir", str(home), env={"HOME": str(short_tmp / "elsewhere")})
    assert table.returncode == 0
    header, body, where = table.stdout.splitlines()
    assert header.split()[:4] == ["SESSION", "WORKSPACE", "STATUS", "EVENTS"]  # docs/JMP.md
    assert body.split()[:3] == [session_id, str((short_tmp / "ws").resolve()), "completed"]
    assert body.endswith("first task")
    assert where == f"sessions are kept in {home}"
    mine = jmp("--list", "--sessions-dir", str(home), env={"HOME": str(short_tmp.resolve())})
    assert mine.stdout.splitlines()[1].split()[1] == "~/ws"  # under your home: ~
    none = short_tmp / "none"
    assert jmp("--list", "--sessions-dir", str(none)).stdout == (
        f"no sessions yet\nsessions are kept in {none}\n"
    )


def test_list_imports_no_sdk_zmq_or_msgspec(home, session_id):
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(ROOT / "main.py"),
            "--list",
            "--json",
            "--sessions-dir",
            str(home),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    assert "json" in imported  # the probe works
    assert not imported & {*VENDOR, "msgspec", "host"}
    loaded = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    protocol = {name for name in loaded if name.split(".")[0] == "protocol"}
    assert protocol <= {"protocol", *SHARED_LEAF}, protocol  # stdlib only (test_import_graph)


def test_console_script_is_installed(home):
    script = Path(sys.executable).parent / "jmp"
    proc = subprocess.run(
        [str(script), "--list", "--json", "--sessions-dir", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and json_line(proc.stdout)["kind"] == "sessions"


def test_fresh_interpreter_imports_no_vendor_sdk():
    code = "import sys, kernel.store.session, cli.main, cli.printer\n"
    code += "print([m for m in %r if m in sys.modules])"
    proc = subprocess.run(
        [sys.executable, "-c", code % (VENDOR,)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_valid_invocations_reach_cli_run(monkeypatch, home, session_id, short_tmp):
    calls = []

    def fake_run(options, printer):
        calls.append(options)
        return 0

    monkeypatch.setattr("cli.run.run", fake_run)
    assert main(["--json", "--workspace", str(short_tmp), "--no-mcp", "task one"]) == 0
    assert main(["--session", session_id, "--sessions-dir", str(home), "--compact"]) == 0
    assert main(["--session", session_id, "--sessions-dir", str(home), "--ack-interrupted"]) == 0
    assert (
        main(
            [
                "--session",
                session_id,
                "--sessions-dir",
                str(home),
                "--workspace",
                str(short_tmp / "ws"),
                "again",
            ]
        )
        == 0
    )
    first, compact, ack, again = calls
    assert (first.prompt, first.json, first.no_mcp, first.workspace) == (
        "task one",
        True,
        True,
        short_tmp.resolve(),
    )
    assert compact.compact and compact.session == session_id and compact.prompt is None
    assert compact.sessions_dir == str(home)
    assert ack.ack_interrupted and not ack.compact
    assert again.prompt == "again" and again.workspace == (short_tmp / "ws").resolve()


def test_errors_from_the_run_exit_2_with_a_result(monkeypatch, capsys):
    def broken(options, printer):
        raise KeyError("sk-abcdefghijklmnopqrstuvwxyz0123")

    monkeypatch.setattr("cli.run.run", broken)
    assert main(["--json", "task"]) == 2
    out, err = capsys.readouterr()
    result = json_line(out)
    assert result["data"]["status"] == "error" and "KeyError" in result["data"]["summary"]
    assert "sk-abc" not in out + err


def test_printer_json_lines_carry_the_envelope(short_tmp):
    out = io.StringIO()
    printer = Printer(json=True, out=out)
    secret = "printer-secret-1"
    (short_tmp / "ws").mkdir()
    with Session.create(
        short_tmp / "h", short_tmp / "ws", on_event=printer.event, secrets=[secret]
    ) as s:
        s.append(UserData(text=f"hi {secret}"))
        s.emit(ModelProgressData(stage="respond", characters=7))
        s.sync()  # as the CLI: the result line after every record was fsynced and shown
        printer.result(
            {
                "session_id": s.id,
                "status": "completed",
                "summary": "ok",
                "session_dir": str(s.directory),
            }
        )
    lines = json_lines(out.getvalue())
    assert [(m["kind"], m["seq"]) for m in lines] == [
        ("session", 1),
        ("user", 2),
        ("model_progress", None),
        ("result", None),
    ]
    assert all(set(m) >= {"version", "session_id", "seq", "kind", "data"} for m in lines)
    assert lines[1]["data"] == {"text": "hi [REDACTED]"}
    assert lines[2]["data"]["characters"] == 7
    assert lines[3]["data"]["session_dir"] == str(s.directory)
    assert secret not in out.getvalue()


def test_live_view_renders_every_stored_kind():
    out = io.StringIO()
    printer = Printer(json=False, out=out)
    for event in EventLog(BASIC).load():
        printer.event(event)
        assert render(event) is None or render(event).strip()
    text = out.getvalue()
    assert "▶ bash pytest -q tests/test_ops.py" in text
    assert "✗ bash error exit 1" in text and "FAILED tests/test_ops.py" in text
    assert "outcome unknown (worker_exit, not acknowledged)" in text
    assert "divide() now raises ValueError" in text
    assert "\r" not in text  # no progress animation into a pipe


def test_live_view_overwrites_one_progress_line_on_a_terminal(short_tmp):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    printer = Printer(json=False, out=out)
    events = EventLog(BASIC).load()
    from protocol.codec import make_event

    for n in (10, 20):
        printer.event(
            make_event("a" * 32, None, 1.0, ModelProgressData(stage="respond", characters=n))
        )
    printer.event(events[-3])  # final
    text = out.getvalue()
    assert text.count("\r\033[K") == 3 and "20 characters" in text
    assert text.endswith(
        "divide() now raises ValueError on a zero divisor, as the test expects.\n\n"
    )


def test_an_mcp_config_no_process_can_take_is_refused_before_a_session(short_tmp):
    """A NUL or a lone surrogate in the MCP config (JSON spells both) is a clear error naming
    the file and the field, exit 2, and no session: not a run whose MCP server then fails."""
    (short_tmp / "ws").mkdir()
    config = short_tmp / "mcp.json"
    config.write_text('{"mcpServers": {"fs": {"command": "npx", "args": ["a\\ud800"]}}}')
    keys = {"TYPESAFE_API_KEY": "k-0123456789", "FLASH_API_KEY": "f-0123456789"}
    home = short_tmp / "sessions"
    done = jmp(
        "--json", "--sessions-dir", str(home), "do it",
        cwd=short_tmp / "ws", env={**keys, "JMP_MCP_CONFIG": str(config), "JMP_WARM": "0"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = json_lines(done.stdout)
    assert [line["kind"] for line in lines] == ["result"]
    summary = lines[0]["data"]["summary"]
    assert f"MCP config {config}: mcpServers.fs.args[0]: contains a lone surrogate" in summary
    assert not home.exists() or not any(home.iterdir())


def test_help_exits_0():
    proc = jmp("--help")
    assert proc.returncode == 0 and "--sessions-dir" in proc.stdout


# What `jmp --version` and `jmp --help` may load of jmp's: the parser, the text they print and
# where it comes from (the version and the data homes: kernel/config/install.py, stdlib only).
ABOUT = {"cli", "cli.main", "cli.about", "kernel", "kernel.errors", "kernel.config"}
ABOUT |= {"kernel.config.install", "jmp_agent"}  # jmp_agent: main.py's lazy re-exports
OURS = ("cli", "kernel", "workers", "protocol", "host", "acp_server", "jev_harness", "jmp_agent")


@pytest.mark.parametrize("flag", ["--version", "--help"])
@pytest.mark.parametrize("how", ["console script", "main.py"])
def test_version_and_help_import_only_what_they_print(flag, how, home):
    """Issue 33: they start near a bare interpreter. No kernel module past the install's
    description, no worker, protocol or model module, no vendor SDK, not even typing or json."""
    argv = [str(Path(sys.executable).parent / "jmp")] if how == "console script" else []
    argv = argv or [sys.executable, str(ROOT / "main.py")]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run([*argv, flag], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and ("jmp " in proc.stdout or "--sessions-dir" in proc.stdout)
    loaded = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()[1:]}
    assert "argparse" in loaded  # the probe works
    ours = {name for name in loaded if name.split(".")[0] in OURS}
    assert ours <= ABOUT, sorted(ours - ABOUT)
    third = {*VENDOR, "msgspec", "psutil", "typing", "json"}
    assert not {name.split(".")[0] for name in loaded} & third
