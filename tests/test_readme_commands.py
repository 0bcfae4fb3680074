"""Every command in the README and the manuals runs as written (issue 23), or names the test
that runs it.

The commands are read from the plain code blocks of README.md and of the manuals (DOCS: a
line starting with a program a person types). Each one is in WHERE: `run` (run here, by bash,
in a fresh home against the loopback models), `synopsis` (every option it names is in the
program's --help) or the test file that runs it (a campaign or an install takes minutes). A
command missing from WHERE, or an entry no document has any more, fails the test: the docs
and this list move together. Substituted, and only that: `...` keys (the loopback servers'
keys are in the environment instead), `<id>` / `<session id>` (the session the earlier command
made), and the keyless first task's fixed ports 8787 and 8788 (the suite's servers take free
ones: other runs share this machine).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from kernel.store.catalog import list_sessions
from tests.support.cli import FLASH_KEY, JEV_KEY, ROOT

DOCS = ("README.md", "docs/JMP.md", "docs/JEV-HARNESS.md", "docs/EDITORS.md", "docs/RESILIENCE.md")
DOCS += ("docs/ARCHITECTURE.md",)
PROGRAMS = ("make", "jmp", "python", "jev-harness", "jmp-demo", "jmp-chaos", "uv", "export")
PROGRAMS += ("mkdir", "jev-harness-mcp")
CHAOS = "tests/jmp_lab/test_chaos.py"
RENDERED = "tests/jmp_lab/test_chaos_rendered.py"  # `jmp-chaos rendered`, through its entry
CRASH = "tests/jmp_lab/test_crash_states.py"  # its parts, on a one-call workload
SEEDS = "tests/test_seed_examples.py"  # the seeds' commands, word for word
FIRST = "first task"  # the keyless first task: test_the_keyless_first_task_runs_as_written and
# tests/test_install.py (first_run())
WHERE = {
    "uv tool install --compile-bytecode /path/to/jmp": "tests/test_install.py",
    "jmp --version": "run",
    "jmp-demo --serve": FIRST,
    "export TYPESAFE_BASE_URL=http://127.0.0.1:8787 TYPESAFE_API_KEY=loopback-not-a-real-key"
    " FLASH_BASE_URL=http://127.0.0.1:8788/v1 FLASH_API_KEY=loopback-not-a-real-key": FIRST,
    "mkdir -p ~/jmp-try && cd ~/jmp-try": FIRST,
    'jmp "write hello.py that prints hello"': FIRST,
    "make install": "the environment running this suite",
    "make check": "this suite, after lint and types (CI: test_ci_runs_the_readmes_commands)",
    "make install-browser": "CI, before make check (test_ci_runs_the_readmes_commands)",
    "make test": (
        "this suite (test_make_test_runs_in_two_processes_and_ends_with_its_slowest_tests)"
    ),
    "export TYPESAFE_API_KEY=...": "run",
    "export FLASH_API_KEY=...": "run",
    'jmp --workspace ~/src/project "add a --verbose flag to cli.py and run the tests"': "run",
    'jmp --session <id> "now update the README"': "run",
    "jmp --list": "run",
    'jmp [--json] [--workspace PATH] [--no-mcp] "task"': "synopsis",
    'jmp [--json] --session ID ["follow-up"] [--compact] [--ack-interrupted]': "synopsis",
    "jmp --list [--json]": "synopsis",
    "jmp --acp": "synopsis",
    "jev-harness run FILE --goal TEXT --inputs JSON [--max-steps N] [--timeout S] [--json]": (
        "synopsis"
    ),
    "jev-harness inspect SESSION_ID [--json]": "synopsis",
    "jev-harness examples [--copy DIR]": "synopsis",
    "jev-harness-mcp SCRIPT --goal TEXT --inputs JSON [--direct-only] [--archive FILE]": (
        "synopsis"
    ),
    'python main.py --json [--workspace PATH] [--no-mcp] "task"': "synopsis",
    'python main.py --json --session ID "follow-up"': "synopsis",
    "python main.py --json --session ID": "synopsis",
    "python main.py --json --session ID --compact": "synopsis",
    "python main.py --json --session ID --ack-interrupted": "synopsis",
    "python main.py --json --session ID --verify": "synopsis",
    "python main.py --json --list": "synopsis",
    "jev-harness check-task FILE [--inputs JSON] [--json]": "synopsis",
    "jev-harness run FILE --goal TEXT --inputs JSON [--context JSON] [--max-steps N]"
    " [--timeout S]": "synopsis",
    "jev-harness inspect SESSION_ID [--sessions-dir PATH] [--json]": "synopsis",
    'mkdir -p proj/docs && echo "The release codename is ORCA-7, chosen in May." >'
    " proj/docs/notes.md": "run",
    'jev-harness check-task examples/workspace_task.py --inputs \'{"root": "proj",'
    ' "queries": ["codename"], "markers": {"codename": "ORCA-7"}, "output": "r.json"}\'': "run",
    'jev-harness run examples/workspace_task.py --goal "Find the release codename" --inputs'
    ' \'{"root": "proj", "queries": ["codename"], "markers": {"codename": "ORCA-7"},'
    ' "output": "r.json"}\'': "run",
    "jev-harness inspect <session id>": "run",
    "jev-harness-mcp SCRIPT --goal TEXT --inputs JSON [--context JSON] [--max-steps N]": "synopsis",
    "jev-harness check-task examples/research_task.py": SEEDS,
    "jev-harness run examples/research_task.py --goal 'Investigate the requested categories and"
    ' save sourced quotes\' --inputs \'{"url":"https://docs.example.org/","allowed_origins":'
    '["https://docs.example.org"],"markers":{"requirements":"<source marker>"},'
    '"output":"local-results/research.json"}\' --max-steps 20 --timeout 120': SEEDS,
    "make chaos": CHAOS,
    "python -m jmp_lab.chaos --quick --lanes 2 --iterations 40 --seed 7 --power mix": CHAOS,
    "jmp-chaos --iterations 2 --seed 7 --power off": CHAOS,
    "python -m jmp_lab.chaos --iterations 20 --seed 7 [--minutes 30]": CHAOS,
    "python -m jmp_lab.chaos --iterations 20 --seed 7 --jmp '/path/to/other/.venv/bin/python"
    " /path/to/other/main.py'": CHAOS,
    "make chaos CHAOS_JMP='/usr/local/bin/jmp'": CHAOS,
    "make chaos_": CHAOS,
    "python -m jmp_lab.chaos --iterations 9 --seed 7 --power only": CHAOS,
    "python -m jmp_lab.chaos --power off ...": CHAOS,
    "python -m jmp_lab.chaos.powercut check": "run",
    "make chaos-rendered": RENDERED,
    "jmp-chaos rendered --iterations 2 --seed 3 --first 2": RENDERED,
    "make crash-states": CRASH,
    "make crash-states CRASH_WORKLOADS=cli-3 CRASH_MINUTES=480": CRASH,
    "jmp-chaos crash-states --workloads bash write+edit --models strict --no-recover": CRASH,
    "jmp-chaos crash-states --replay crash-states/jmp-bash-strict-printed-lost": CRASH,
}


def first_run() -> tuple[str, str, list[str]]:
    """README "A first run", as written: the server command, the export line it prints (with
    the fixed ports), and what the user types after pasting it. tests/test_install.py runs them
    on the installed tool, test_the_keyless_first_task_runs_as_written in this venv."""
    serve, export, *typed = [c for c, w in WHERE.items() if w == FIRST]
    assert serve.startswith("jmp-demo --serve") and export.startswith("export "), (serve, export)
    return serve, export, typed


def readme_commands() -> list[str]:
    """The command lines of the README and the manuals, comments and continuations removed; a
    command repeated within one document gets a `_` per earlier occurrence there (it is listed
    once per place), one that another document also shows is the same entry."""
    found: list[str] = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        here: list[str] = []
        for lang, body in re.findall(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M):
            if lang:
                continue  # json, python: configuration and code, not commands
            for line in body.replace("\\\n", " ").splitlines():
                if line.split(" ", 1)[0] not in PROGRAMS:
                    continue
                command = " ".join(_without_comment(line).split())
                while command in here:
                    command += "_"
                here.append(command)
        found += [c for c in here if c not in found]
    return found


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a comment (after a space, outside quotes)."""
    quote = ""
    for n, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (n == 0 or line[n - 1].isspace()):
            return line[:n]
    return line


def test_every_readme_command_is_run_or_named() -> None:
    commands = readme_commands()
    missing = [c for c in commands if c not in WHERE]
    assert not missing, f"README commands this test does not know (add them to WHERE): {missing}"
    stale = [c for c in WHERE if c not in commands]
    assert not stale, f"WHERE names commands the README no longer has: {stale}"
    for where in WHERE.values():
        assert not where.startswith("tests/") or (ROOT / where).is_file(), where


def test_the_synopses_name_only_options_that_exist() -> None:
    helps: dict[str, str] = {}
    for command, where in WHERE.items():
        if where != "synopsis":
            continue
        words = command.split()
        key = words[0] if words[0] in ("jmp", "jev-harness-mcp") else " ".join(words[:2])
        if key not in helps:
            main_help = [sys.executable, str(ROOT / "main.py"), "--help"]  # jmp is the same CLI
            mcp_help = [str(Path(sys.executable).parent / "jev-harness-mcp"), "--help"]
            argv = {"python main.py": main_help, "jmp": main_help, "jev-harness-mcp": mcp_help}.get(
                key
            ) or [sys.executable, "-m", "jev_harness.cli", *words[1:2], "--help"]
            done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True)
            helps[key] = done.stdout + done.stderr  # the MCP server keeps stdout for frames
        for option in re.findall(r"--[a-z-]+", command):
            assert option in helps[key], (command, option)


@pytest.mark.slow
def test_the_runnable_readme_commands_run_as_written(short_tmp: Path) -> None:
    home = short_tmp / "home"
    (home / "src" / "project").mkdir(parents=True)
    work = short_tmp / "checkout"  # "from the checkout": its examples, a directory of ours
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    (short_tmp / "mcp.json").write_text('{"mcpServers": {}}')
    with JevServer() as jev, FlashServer() as flash:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_"))}
        env |= {k: os.environ[k] for k in ("JMP_WARM", "JMP_WARM_DIR") if k in os.environ}
        env |= {
            "HOME": str(home),
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
            "TYPESAFE_API_KEY": JEV_KEY,  # what the README's `export ...=...` lines set
            "TYPESAFE_BASE_URL": jev.url,
            "FLASH_API_KEY": FLASH_KEY,
            "FLASH_BASE_URL": flash.url,
            "JMP_SESSIONS_DIR": str(short_tmp / "sessions"),  # not the checkout's .jmp
            "JMP_MCP_CONFIG": str(short_tmp / "mcp.json"),
        }

        def bash(command: str, cwd: Path = work) -> str:
            done = subprocess.run(
                ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                timeout=240, check=False,
            )  # fmt: skip
            assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
            return done.stdout

        def newest() -> str:
            return list_sessions(short_tmp / "sessions")[0].session_id

        ran = {c for c, w in WHERE.items() if w == "run" and c.startswith("export ")}
        assert bash("jmp --version").startswith("jmp ")
        ran.add("jmp --version")
        jev.script([{"route": "done"}, {"completion_review": "complete"}] * 2)
        flash.queue([{"text": "Added --verbose."}, {"text": "README updated."}])
        for command in [c for c in WHERE if c.startswith(("jmp --workspace", "jmp --session"))]:
            out = bash(command.replace("<id>", newest() if "<id>" in command else ""))
            assert "[completed] session" in out, out
            ran.add(command)
        assert newest() in bash("jmp --list")
        ran.add("jmp --list")
        jev.script([
            {"tool": "files.search"}, {"tool": "files.read"},
            {"tool": "record_evidence"}, {"tool": "save_report"},
        ])  # fmt: skip
        for command in [c for c in WHERE if WHERE[c] == "run" and c.split()[0] in ("mkdir",
                        "jev-harness")]:  # fmt: skip
            bash(command.replace("<session id>", newest()))
            ran.add(command)
        assert (work / "r.json").is_file()
        check = "python -m jmp_lab.chaos.powercut check"
        done = subprocess.run(
            ["bash", "-c", check], cwd=work, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode in (0, 2) and (done.returncode == 0 or done.stderr.strip())
        ran.add(check)
    assert ran == {c for c, w in WHERE.items() if w == "run"}


def test_make_test_runs_in_two_processes_and_ends_with_its_slowest_tests() -> None:
    """What `make test` runs (docs/ARCHITECTURE.md): two pytest-xdist processes, and the 15
    slowest tests at the end, so that where the suite's time goes is in every run's output."""
    outer = ("TEST_WORKERS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # a `make test TEST_WORKERS=1`
    env = {k: v for k, v in os.environ.items() if k not in outer}
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    (line,) = [x for x in dry.stdout.splitlines() if " -m pytest " in x]
    assert "--durations=15" in line.split() and "-n 2" in line, line


def test_ci_runs_the_readmes_commands() -> None:
    """CI (.ci/run) runs the contributors' block of the README, the setup and the check, in
    that order and nothing else; `make check` is lint, format, types, then the suite."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("From a checkout (contributors):", 1)[1].split("```", 2)[1]
    documented = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    ran = [line.strip() for line in ci if line.strip().startswith("make ")]
    assert ran == documented == ["make install", "make install-browser", "make check"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^check: lint type test$", makefile, re.M), "make check gates less"
    assert "ruff format --check" in makefile


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_keyless_first_task_runs_as_written(short_tmp: Path) -> None:
    """README "A first run": `jmp-demo --serve` in one terminal; in another the export line it
    prints (the README's, but for the ports), then a task the user types, completed."""
    serve, export, typed = first_run()
    home = short_tmp / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))}
    env |= {k: os.environ[k] for k in ("JMP_WARM", "JMP_WARM_DIR") if k in os.environ}
    env |= {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        "JMP_SESSIONS_DIR": str(short_tmp / "sessions"),
        "JMP_MCP_CONFIG": str(short_tmp / "mcp.json"),  # none of the checkout's
        "PYTHONUNBUFFERED": "1",
    }
    (short_tmp / "mcp.json").write_text('{"mcpServers": {}}')
    argv = ["bash", "-c", f"exec {serve} --jev-port 0 --flash-port 0"]
    with subprocess.Popen(
        argv, env=env, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        stdin=subprocess.DEVNULL,
    ) as server:  # fmt: skip
        try:
            assert server.stdout is not None
            printed = next(line for line in server.stdout if line.startswith("export ")).strip()
            ports = re.findall(r"127\.0\.0\.1:(\d+)", printed)
            assert printed == export.replace("8787", ports[0]).replace("8788", ports[1])
            script = "\n".join([printed, *typed])
            done = subprocess.run(
                ["bash", "-c", script], env=env, cwd=home, capture_output=True, text=True,
                timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            assert "[completed] session" in done.stdout, done.stdout
            assert "You asked: “write hello.py that prints hello”" in done.stdout
            [info] = list_sessions(short_tmp / "sessions")
            assert info.workspace == str(home / "jmp-try")
            server.send_signal(signal.SIGINT)
            assert server.wait(timeout=60) == 0
        finally:
            if server.poll() is None:
                server.kill()
