"""The matrix covers every front end and spawn path there is: a new one cannot skip it.

Entry points are found, not listed: the console scripts of pyproject.toml, every module of a
product package runnable with `python -m` (a `__main__.py`, or an `if __name__ == "__main__"`
block), `main.py`, and the Python API's runners. Each must be driven by a front end of the
matrix (frontends.py `entries`), or be declared here as an alias of one (same code, another
name) or as no front end at all, with the reason. Spawn paths likewise: every class in
kernel/supervision that the kernel hands workers back as (`exited` and `wait`: the `Proc`
protocol of spawn.py) must be covered by a path of paths.py.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from tests.security.frontends import FRONT_ENDS
from tests.security.paths import IMPLEMENTS, PATHS
from tests.security.pending import PENDING
from tests.support.cli import ROOT

PRODUCT = ("cli", "acp_server", "jev_harness", "apixly_jev_harness", "kernel", "protocol", "host")
PRODUCT += ("workers", "jmp_lab")

# An entry point that runs the same code as a covered one (the reason says why it is the same).
ALIASES = {
    "script:main.py": "`python main.py` calls cli.main.main, as the jmp console script does",
    "module:jev_harness.mcp": "jev_harness.mcp.cli:entry, as the jev-harness-mcp console "
    "script runs it; what `python -m` adds (the launch directory) is tests/test_launch_dir.py's",
    "module:apixly_jev_harness.mcp": "the same entry under the alias package (see above)",
    "console:jmp-agent": "cli.main:entry, as the jmp console script: the name `uvx jmp-agent` "
    "runs (agent.json, the ACP registry entry)",
}
# Entry points that are no front end: nothing a person or a client starts a task through.
NOT_FRONT_ENDS = {
    "module:jev_harness.check": "the check-task probe: started by `jev-harness check-task`, "
    "runs no worker (issue 20 item 6's rows belong to its own tests)",
    "module:protocol.docgen": "writes the generated docs (make docs)",
    "module:workers.pool": "the warm pool itself: a spawn path (paths.py), not a front end",
    "module:workers.router": "a worker, spawned by kernels",
    "module:workers.generator": "a worker, spawned by kernels",
    "module:workers.tool": "a worker, spawned by kernels",
    "module:workers.harness": "a worker, spawned by kernels",
}
# Whole packages of entry points that are no front end (matched by module prefix).
NOT_FRONT_END_PACKAGES = {
    "module:jmp_lab.": "the lab: loopback model servers, a fake MCP server, the demo and the "
    "chaos runner (with its power-cut disk); the demo and the chaos runner drive the jmp CLI",
}
NOT_FRONT_ENDS |= {
    "console:jmp-demo": "jmp_lab.demo: runs the jmp CLI against the loopback servers",
    "console:jmp-chaos": "jmp_lab.chaos: runs the jmp CLI under random kills and faults",
}
# Modes of one entry point that are front ends of their own (a flag that changes the protocol).
MODES = {"console:jmp": ["--acp"], "script:main.py": ["--acp"]}
# The Python API's runners: what an embedding program starts a task through.
PYTHON_RUNNERS = ("python:main.Agent", "python:jev_harness.open_session")


def _runnable_modules() -> list[str]:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if path.name == "__main__.py":
                found.append(module.removesuffix(".__main__"))
            elif _has_main_block(path):
                found.append(module)
    return found


def _has_main_block(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)]
            values = [n.value for n in ast.walk(node.test) if isinstance(n, ast.Constant)]
            if "__name__" in names and "__main__" in values:
                return True
    return False


def entry_points() -> list[str]:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    found = [f"console:{name}" for name in scripts]
    found += [f"module:{m}" for m in _runnable_modules()]
    found.append("script:main.py")
    found += [f"{entry} {mode}" for entry, modes in MODES.items() for mode in modes]
    return [*found, *PYTHON_RUNNERS]


def test_every_entry_point_is_a_front_end_of_the_matrix_an_alias_or_declared_none() -> None:
    covered = {entry for fe in FRONT_ENDS.values() for entry in fe.entries}
    found = entry_points()  # parses every product module: once, not once per entry
    missing = [
        e
        for e in found
        if e not in covered
        and e.split(" ")[0] not in ALIASES
        and e not in NOT_FRONT_ENDS
        and not any(e.startswith(prefix) for prefix in NOT_FRONT_END_PACKAGES)
    ]
    assert not missing, f"entry points no matrix front end drives: {missing}"
    stale = [e for e in [*covered, *ALIASES, *NOT_FRONT_ENDS] if e not in found]
    assert not stale, f"declared entry points that no longer exist: {stale}"


def test_the_python_runners_exist() -> None:
    import jev_harness
    import main

    assert callable(main.Agent) and callable(jev_harness.open_session)


def test_every_spawn_path_of_the_kernel_is_a_path_of_the_matrix() -> None:
    handles = []
    for path in sorted((ROOT / "kernel" / "supervision").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not _is_protocol(node):
                methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                if {"exited", "wait"} <= methods:
                    handles.append(node.name)
    assert sorted(handles) == sorted(IMPLEMENTS), f"process handles {handles} vs {IMPLEMENTS}"
    assert set(IMPLEMENTS.values()) == set(PATHS)


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)


def test_every_pending_entry_names_a_row() -> None:
    rows = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                args = {a.arg for a in node.args.args}
                if args & {"probe", "crash", "kernel_kill", "powercut", "cell"}:
                    rows.add(node.name)
    unknown = [p.row for p in PENDING if p.row not in rows]
    assert not unknown, f"pending.py names no such row: {unknown}"
