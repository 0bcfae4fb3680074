"""Keys stay in the kernel (issue 20, items 4 and 5), on jev-harness run, open_session and the
MCP server, warm and cold.

Item 4: the task script (scripts/key_probe.py overrides `configure` and keeps its arguments,
its inputs, both views of its environment and every protocol message alive in the worker) is
given no key: not the model keys, and not CAMOFOX_ACCESS_KEY when its task holds no Camofox
provider; `--direct-only` too. Item 5: a key written into the goal, the context or an input, or
found in a file's name or text, reaches no Jev request body, no client and no session file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jmp_lab.servers.jev import JevServer
from tests.harness.helpers import JEV_KEY, ROOT, SCRIPTS, HarnessCli
from tests.harness.mcp_helpers import McpServer

PROBE = SCRIPTS / "key_probe.py"
KEYS = {
    "TYPESAFE_API_KEY": JEV_KEY,
    "FLASH_API_KEY": "sk-flash-key-for-the-probe-0123456789",
    "DEEPSEEK_API_KEY": "deepseek-key-for-the-probe-987654",
    "CAMOFOX_ACCESS_KEY": "camofox-key-for-the-probe-abcdef",
}
GOAL = "look around; here are the keys: " + " ".join(KEYS.values())
CONTEXT = {"keys": list(KEYS.values()), KEYS["FLASH_API_KEY"]: "a key as a key"}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[HarnessCli]:
    with JevServer() as jev:
        yield HarnessCli(short_tmp, jev)


def leaked(text: str) -> list[str]:
    return [name for name, key in KEYS.items() if key in text]


def inputs(cli: HarnessCli) -> dict[str, Any]:
    return {"probe": str(cli.tmp / "probe.jsonl"), "note": f"an input with {KEYS['FLASH_API_KEY']}"}


def probe_problems(cli: HarnessCli, operated: bool = True) -> list[str]:
    """What the script kept: no key anywhere, and the goal it was given redacted."""
    lines = [json.loads(line) for line in (cli.tmp / "probe.jsonl").read_text().splitlines()]
    when = [line["when"] for line in lines]
    assert when[:2] == ["build", "configure"] and ("operate" in when) is operated, when
    kept = json.dumps(lines)
    problems = [f"the task script was given {name}" for name in leaked(kept)]
    if "[REDACTED]" not in lines[1]["args"][0]:  # the goal, redacted before the worker got it
        problems.append("the goal reached the task script unredacted")
    return problems


def left_problems(cli: HarnessCli, *texts: str) -> list[str]:
    """No key in what the client got, in a Jev request body or in the session's files."""
    problems = [f"{name} reached the client" for name in leaked("".join(texts))]
    bodies = json.dumps(cli.jev.systemone_bodies())
    problems += [f"{name} reached Jev" for name in leaked(bodies)]
    for path in cli.home.rglob("*"):
        if path.is_file():
            problems += [
                f"{n} stored in {path}" for n in leaked(path.read_text("utf-8", "replace"))
            ]
    return problems


@pytest.mark.parametrize("path", ["warm", "cold"])
def test_jev_harness_run_gives_the_script_and_jev_no_key(cli: HarnessCli, path: str) -> None:
    cli.extra_env.update({k: v for k, v in KEYS.items() if k != "TYPESAFE_API_KEY"})
    if path == "cold":
        cli.extra_env["JMP_WARM"] = "0"
    cli.jev.script([{"probe.look.how": "quick"}])
    out = cli.run(PROBE, GOAL, inputs(cli), "--context", json.dumps(CONTEXT))
    assert out.code == 0 and out.result["status"] == "completed", out.stderr[-3000:]
    (body,) = cli.jev.systemone_bodies()  # Jev was asked, with the goal and context in state
    problems = probe_problems(cli) + left_problems(cli, out.stdout, out.stderr)
    assert not problems, problems
    assert body["state"].count("[REDACTED]") >= 2 * len(KEYS), body["state"]


def test_open_session_gives_the_script_and_jev_no_key(
    cli: HarnessCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jev_harness import open_session

    for name, key in KEYS.items():
        monkeypatch.setenv(name, key)
    monkeypatch.setenv("TYPESAFE_BASE_URL", cli.jev.url)
    monkeypatch.chdir(cli.cwd)
    cli.jev.script([{"probe.look.how": "quick"}])
    with open_session(PROBE, GOAL, inputs(cli), context=CONTEXT, sessions_dir=cli.home) as session:
        view = session.observe()
        result = session.delegate()
    assert result["status"] == "completed", result
    assert cli.jev.systemone_bodies()
    problems = probe_problems(cli) + left_problems(cli, json.dumps(view), json.dumps(result))
    assert not problems, problems


def test_the_mcp_server_direct_only_gives_the_script_no_key(cli: HarnessCli) -> None:
    """--direct-only needs no Jev key, and the script gets none even when all are set."""
    cli.extra_env.update({k: v for k, v in KEYS.items() if k != "TYPESAFE_API_KEY"})
    extra = ("--direct-only", "--context", json.dumps(CONTEXT))
    server = McpServer(cli, PROBE, inputs(cli), *extra, goal=GOAL)
    seen: list[Any] = []

    async def main() -> None:
        async with server.connect() as c:
            view = await c.ok("observe")
            args = await c.ok("arguments", {"tool": "probe.look", "state_ref": view["state_ref"]})
            operated = await c.ok(
                "operate",
                {
                    "tool": "probe.look",
                    "parameters": {"how": "quick"},
                    "state_ref": view["state_ref"],
                },
            )
            seen.extend([view, args, operated])

    anyio.run(main)
    assert seen[2]["complete"] is True, seen
    assert cli.jev.systemone_bodies() == []  # direct operation asks Jev nothing
    problems = probe_problems(cli) + left_problems(cli, json.dumps(seen), server.stderr)
    assert not problems, problems


def test_a_key_in_a_file_name_and_text_reaches_no_one_and_the_report_still_matches(
    cli: HarnessCli,
) -> None:
    """A workspace file named after a key, holding a key: Jev is offered the path redacted
    (an alias, turned back into the real path for the worker), the kernel redacts the report
    before the worker writes it, and the receipt matches the report as written."""
    cli.extra_env.update({k: v for k, v in KEYS.items() if k != "TYPESAFE_API_KEY"})
    root = cli.cwd / "proj" / "docs"
    root.mkdir(parents=True)
    name = f"notes-{KEYS['CAMOFOX_ACCESS_KEY']}.md"
    (root / name).write_text(f"Intro.\n\nThe codename is ORCA-7, key {KEYS['FLASH_API_KEY']}.\n")
    (root / "other.md").write_text("The codename is ORCA-7 here too.\n")
    cli.jev.script(
        [
            {"tool": "files.list"},
            {"tool": "files.read"},
            {"files.read.path": "docs/notes-[REDACTED].md"},
            {"tool": "record_evidence"},
            {"tool": "save_report"},
        ]
    )
    example_inputs = {"root": "proj", "queries": [], "markers": ["ORCA-7"], "output": "r.json"}
    out = cli.run(ROOT / "examples" / "workspace_task.py", "find the codename", example_inputs)
    assert out.code == 0 and out.result["status"] == "completed", out.stderr[-3000:]
    assert out.result["artifact"]["match"] is True
    report = (cli.cwd / "r.json").read_text()
    assert not leaked(report) and "ORCA-7" in report and "[REDACTED]" in report
    bodies = json.dumps(cli.jev.systemone_bodies())
    assert "docs/notes-[REDACTED].md" in bodies
    problems = left_problems(cli, out.stdout, out.stderr)
    assert not problems, problems


def test_a_key_cut_by_the_outcome_bound_leaves_no_piece_of_it(cli: HarnessCli) -> None:
    """Issue 32 item 6: a tool's text is cut to the outcome's 1,200 characters inside the
    script, before anything redacts it; a configured key read from a workspace file that
    straddles the cut leaves none of its characters, 8 or more in a row, in the session's files
    (events.jsonl), Jev's requests or what the client got."""
    key = KEYS["DEEPSEEK_API_KEY"]
    cli.extra_env["DEEPSEEK_API_KEY"] = key
    leak = cli.cwd / "leak.txt"
    for start in (1186, 1199 - 8):  # 13 and 8 of its characters before the cut
        leak.write_text("x" * start + key + " and more text after it\n")
        cli.jev.script([{"cut.read.how": "quick"}, {"cut.read.how": "thorough"}])
        out = cli.run(SCRIPTS / "cut_key.py", "read the file", {"file": str(leak)})
        assert out.code == 0 and out.result["status"] == "completed", out.stderr[-3000:]
        pieces = [key[i : i + 8] for i in range(len(key) - 7)]
        texts = {"the client": out.stdout + out.stderr}
        texts["Jev"] = json.dumps(cli.jev.systemone_bodies(), ensure_ascii=False)
        for path in cli.home.rglob("*"):
            if path.is_file():
                texts[str(path)] = path.read_text("utf-8", "replace")
        log = [t for name, t in texts.items() if name.endswith("events.jsonl")]
        assert log and all("x" * 1100 in t for t in log), "the outcome's text is not in the log"
        found = {name: [p for p in pieces if p in t] for name, t in texts.items()}
        assert not {name: p for name, p in found.items() if p}, (start, found)
