"""Every code block of the README and docs/ runs in the suite (issue 37), or says why not.

A fenced block is one of: commands (no language: each command is in test_readme_commands.py's
WHERE, run there or by the test it names), `json` (parsed; an `mcpServers` one through jmp's own
config loader), `python` (run here, in RUNS), `text` (not code: a diagram, a directory layout,
a sample of output), or marked `<!-- not run: REASON -->` on the line before it. The marks are
few and each says why (a block that cannot run here: a registry the suite does not reach). A
block labelled otherwise that is a Python program using jmp's API (it parses, and it names
`jmp_agent`, `main` or one of the API's names) fails: labelled text, it would escape the run.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer
from tests.support.cli import FLASH_KEY, JEV_KEY, ROOT
from tests.test_readme_commands import DOCS, PROGRAMS

ALL_DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
MARK = re.compile(r"<!-- not run: (.+?) -->\n$")
MAX_MARKS = 2
RUNS = {"docs/CONTRACT.md": 1, "docs/JMP.md": 1}  # the python blocks, per document, run below


def blocks() -> list[tuple[str, str, str, str]]:
    """(document, language, body, mark reason or "") of every fenced block."""
    found = []
    for doc in ALL_DOCS:
        text = (ROOT / doc).read_text()
        for match in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M):
            before = text[: match.start()].rsplit("\n", 2)
            mark = MARK.search(before[-2] + "\n") if len(before) > 1 else None
            found.append((doc, match[1], match[2], mark[1] if mark else ""))
    return found


def test_every_block_is_commands_json_python_text_or_marked() -> None:
    for doc, lang, body, mark in blocks():
        where = f"{doc}: a ```{lang} block starting {body[:60]!r}"
        if mark:
            continue
        assert lang in ("", "json", "python", "text"), where
        if lang == "":  # commands (indented: a synopsis continued), run by WHERE
            assert doc in DOCS, f"{where}: add {doc} to test_readme_commands.DOCS"
            text = body.replace("\\\n", " ")
            lines = [ln for ln in text.splitlines() if ln.strip() and not ln[0].isspace()]
            strange = [ln for ln in lines if ln.split(" ", 1)[0] not in PROGRAMS]
            assert not strange, f"{where}: not commands (label it text, or mark it): {strange}"


def uses_jmps_api(body: str) -> bool:
    """True for a block that parses as a Python program and names jmp's Python API: `jmp_agent`,
    `main` (the contract's spelling) or a name the API exports (jmp_agent.__all__)."""
    import jmp_agent

    try:
        tree = ast.parse(body)
    except SyntaxError:
        return False
    api = {"jmp_agent", "main", *jmp_agent.__all__}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in api:
            return True
        if isinstance(node, ast.Attribute) and node.attr in api:
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in api:
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in api for a in node.names):
            return True
    return False


def test_no_python_using_the_api_hides_under_another_label() -> None:
    """docs/CONTRACT.md section 4 was relabelled text, with undefined names, and escaped
    test_the_python_blocks (issue 37): a block that is jmp API code is labelled python."""
    hidden = [
        f"{doc}: a ```{lang} block starting {body[:60]!r}"
        for doc, lang, body, mark in blocks()
        if lang != "python" and not mark and uses_jmps_api(body)
    ]
    assert not hidden, f"Python using jmp's API, not labelled python (so never run): {hidden}"
    assert uses_jmps_api("session = Session.create(home, workspace, on_event=callback)\n")
    assert not uses_jmps_api("jmp --list\n") and not uses_jmps_api('{"version": 1}\n')


def test_the_marks_are_few_and_say_why() -> None:
    marks = [(doc, mark) for doc, _, _, mark in blocks() if mark]
    assert 0 < len(marks) <= MAX_MARKS, marks
    for doc, reason in marks:
        assert len(reason.split()) >= 8, (doc, reason)  # a reason, not a shrug


def test_the_json_blocks_parse_and_mcp_configs_load(tmp_path: Path) -> None:
    from kernel.config.mcp import load_servers

    count = 0
    for doc, lang, body, _ in blocks():
        if lang != "json":
            continue
        document = json.loads(body)
        count += 1
        if isinstance(document, dict) and "mcpServers" in document:
            config = tmp_path / f"mcp-{count}.json"
            config.write_text(body)
            assert load_servers(config).servers, doc  # jmp's own loader accepts it
    assert count >= 5


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_python_blocks_run_as_written_in_an_application_with_its_own_main(
    short_tmp: Path,
) -> None:
    """docs/JMP.md "From Python" and docs/CONTRACT.md section 4, verbatim, each in a directory
    that has a main.py of its own (the application's): the import name jmp_agent is not
    shadowed by it."""
    python = [(doc, body) for doc, lang, body, _ in blocks() if lang == "python"]
    assert {doc: sum(1 for d, _ in python if d == doc) for doc, _ in python} == RUNS
    app = short_tmp / "app"
    app.mkdir()
    (app / "main.py").write_text("raise SystemExit('the application main.py was imported')\n")
    (short_tmp / "mcp.json").write_text('{"mcpServers": {}}')
    with JevServer() as jev, FlashServer() as flash:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JMP_", "JEV_", "FLASH_"))}
        env |= {k: os.environ[k] for k in ("JMP_WARM", "JMP_WARM_DIR") if k in os.environ}
        env |= {
            "TYPESAFE_API_KEY": JEV_KEY,
            "TYPESAFE_BASE_URL": jev.url,
            "FLASH_API_KEY": FLASH_KEY,
            "FLASH_BASE_URL": flash.url,
            "JMP_SESSIONS_DIR": str(short_tmp / "sessions"),
            "JMP_MCP_CONFIG": str(short_tmp / "mcp.json"),
        }
        for n, (doc, body) in enumerate(python):
            jev.script([{"route": "done"}, {"completion_review": "complete"}])
            flash.queue([{"text": "Nothing failed."}])
            (app / f"use_jmp_{n}.py").write_text(body)
            done = subprocess.run(
                [sys.executable, f"use_jmp_{n}.py"], cwd=app, env=env, capture_output=True,
                text=True, timeout=240,
            )  # fmt: skip
            out = done.stdout[-3000:] + done.stderr[-3000:]
            assert done.returncode == 0, (doc, out)
            assert done.stdout.splitlines()[-1] == "completed Nothing failed.", (doc, out)
            assert str(ROOT) not in done.stderr, (doc, out)
    assert len(list((short_tmp / "sessions").iterdir())) == len(python)


def test_the_install_line_names_the_python_and_the_package_its_license() -> None:
    """Issue 37: the tool install line says which Python; the package says its license."""
    import tomllib

    for doc in ("README.md", "docs/JMP.md"):
        line = next(ln for ln in (ROOT / doc).read_text().splitlines() if "uv tool install" in ln)
        assert "Python >= 3.12" in line, (doc, line)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_readme_says_where_to_get_keys() -> None:
    """Issue 37, item 8: a newcomer with no keys learns where each comes from (at 623aa1b the
    README named the variables only)."""
    readme = (ROOT / "README.md").read_text()
    assert "https://typesafe.ai" in readme  # Jev's, TYPESAFE_API_KEY
    assert "https://platform.deepseek.com/api_keys" in readme  # Flash's, FLASH_API_KEY
    assert "OpenAI-compatible server" in readme  # or a server of one's own
