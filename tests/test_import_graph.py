"""The product's import graph, read with `ast`: workers/ imports only protocol/ and host/ of
ours, host/ only protocol/, protocol/ only itself, the jev-harness library the stdlib only, and
no new import cycle appears (lazy imports inside functions count too: a cycle is a cycle)."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernel", "protocol", "host", "workers", "cli", "acp_server", "jev_harness")
PACKAGES += ("jmp_agent",)
OURS = (*PACKAGES, "main")
# Cycles that are allowed: none (issue 10 broke the last ones). Each entry would be one strongly
# connected component, sorted; the test fails on any cycle not listed. Keep it empty.
KNOWN_CYCLES: set[tuple[str, ...]] = set()
# The harness worker hosts task scripts, which are written against the jev_harness driver
# library: for workers/ it is the SDK of the worker kind, like openhands for the tool worker.
WORKER_MAY_IMPORT = ("workers", "protocol", "host", "jev_harness")


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """The tree of one of our files: parsed once for all the rules here (the sources do not
    change during a run)."""
    return ast.parse(path.read_text())


def _modules() -> dict[str, Path]:
    found = {"main": ROOT / "main.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path], types: bool = False) -> set[str]:
    """What `name` imports of ours when it runs; with `types`, also under `if TYPE_CHECKING:`
    (what a reader, and mypy, must read to understand it)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = _parsed(path)
    not_run = {  # imports under `if TYPE_CHECKING:` / `if __name__ == "__main__":` never run
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and (
            ("TYPE_CHECKING" in ast.unparse(node.test) and not types)
            or "__main__" in ast.unparse(node.test)
        )
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in not_run:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target.split(".")[0] in OURS and target != name:
                out.add(target)
    return out


@functools.cache
def graph(types: bool = False) -> dict[str, set[str]]:
    """Each module's imports of ours (made once per run; the rules only read it); with
    `types`, the imports made for annotations too."""
    known = _modules()
    return {name: _imports(name, path, known, types) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan, iterative enough)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _parents_dropped(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    # `import a.b.c` runs a/__init__ and a/b/__init__ first; a package's __init__ importing its
    # own submodule is how packages work, not a cycle between rooms.
    return {
        name: {t for t in targets if not name.startswith(t + ".")}
        for name, targets in edges.items()
    }


def test_workers_import_only_protocol_of_ours() -> None:
    edges = graph()
    bad = {
        f"{name} -> {target}"
        for name, targets in edges.items()
        if name.split(".")[0] == "workers"
        for target in targets
        if target.split(".")[0] not in WORKER_MAY_IMPORT
        and not (target.startswith("jev_harness") and name.startswith("workers.harness"))
    }
    assert not bad, sorted(bad)


def test_protocol_imports_only_itself() -> None:
    edges = graph()
    bad = {
        f"{n} -> {t}"
        for n, ts in edges.items()
        if n.startswith("protocol")
        for t in ts
        if not t.startswith("protocol")
    }
    assert not bad, sorted(bad)


def test_host_imports_only_protocol_and_itself() -> None:
    """host/ is the second shared leaf (what processes do with the OS): the kernel, the workers
    and the front ends import it; it imports none of them."""
    edges = graph()
    assert any(n.startswith("host.") for n in edges)
    bad = {
        f"{n} -> {t}"
        for n, ts in edges.items()
        if n.split(".")[0] == "host"
        for t in ts
        if t.split(".")[0] not in ("host", "protocol")
    }
    assert not bad, sorted(bad)


def test_no_new_import_cycle() -> None:
    found = set(cycles(_parents_dropped(graph())))
    assert found <= KNOWN_CYCLES, sorted(found - KNOWN_CYCLES)


def test_the_acp_server_reads_without_a_circle_even_for_types() -> None:
    """Each acp_server file can be read alone: no circle, not even through the imports made
    for annotations (issue 33 item 6: session_methods, sink, permission and server imported
    each other's types, and the session methods were a mixin of the server they typed)."""
    edges = {
        name: {t for t in targets if t.startswith("acp_server.")}
        for name, targets in _parents_dropped(graph(types=True)).items()
        if name.startswith("acp_server.")
    }
    assert not cycles(edges)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [("a", "b", "c")]


def test_the_two_loops_never_import_each_other() -> None:
    """The agent loop (kernel/loop) and the jev-harness engine (kernel/harness) share the run
    core (kernel/run) and the supervision, never each other."""
    edges = graph()
    rooms = ("kernel.loop", "kernel.harness")
    bad = {
        f"{name} -> {target}"
        for name, targets in edges.items()
        for target in targets
        for here, there in (rooms, rooms[::-1])
        if name.startswith(here) and (target == there or target.startswith(there + "."))
    }
    assert not bad, sorted(bad)


def test_the_run_core_imports_neither_loop() -> None:
    edges = graph()
    bad = {
        f"{n} -> {t}"
        for n, ts in edges.items()
        if n.startswith("kernel.run")
        for t in ts
        if t.startswith(("kernel.loop", "kernel.harness"))
    }
    assert not bad, sorted(bad)


def test_nothing_of_ours_imports_main() -> None:
    """`main` is the top of the house (the CLI script and the Python boundary's re-exports):
    front ends reach the kernel as `cli` does, never through it (acp_server did)."""
    edges = graph()
    bad = sorted(name for name, targets in edges.items() if "main" in targets and name != "main")
    assert not bad, bad


def private_imports() -> list[str]:
    """`from ours import _name`: a module reaching into another's private names."""
    known = _modules()
    found = []
    for name, path in known.items():
        for node in ast.walk(_parsed(path)):
            if not isinstance(node, ast.ImportFrom) or (node.module is None and not node.level):
                continue
            base = node.module or ""
            if not (node.level or base.split(".")[0] in OURS):
                continue  # a vendor's private name is the vendor's business (and ours to pin)
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{name}: from {'.' * node.level}{base} import {alias.name}")
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    assert private_imports() == []


# jev_harness is two things: the library task scripts import (`import jev_harness as jev`; it runs
# inside the harness worker) and its front ends, which drive kernel objects. The front ends:
HARNESS_FRONT_ENDS = ("jev_harness.cli", "jev_harness.mcp", "jev_harness.session")
# What the library may import besides the stdlib and itself: lxml, for HTML (web/html.py alone).
# The rendered-page provider imports Playwright (and psutil, to kill a browser that stopped
# answering) lazily, at its first fetch: a script that never renders a page loads neither.
HARNESS_LIBRARY_MAY_IMPORT = {
    "jev_harness.web.html": {"lxml"},
    "jev_harness.web.browser": {"playwright", "psutil"},
    "jev_harness.web.chromium": {"playwright"},
}


def _top_level_imports(path: Path) -> set[str]:
    """Every absolute top-level name `path` imports, lazy imports included (not TYPE_CHECKING)."""
    tree = _parsed(path)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - {"__future__"}


def _is_front_end(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in HARNESS_FRONT_ENDS)


# The shared leaf, stdlib only: pure functions over str and their vocabulary (the one redactor,
# the one cleaning of lone surrogates) and the front ends' own line, so that the kernel, the
# workers and the jev_harness library use the same ones (issue 22), and `jmp --list` loads no
# msgspec.
SHARED_LEAF = {
    "protocol.limits",
    "protocol.lines",
    "protocol.redact",
    "protocol.secrets",
    "protocol.text",
}


def test_the_shared_leaf_imports_the_stdlib_only() -> None:
    known = _modules()
    bad = {
        f"{name} -> {top}"
        for name in SHARED_LEAF
        for top in _top_level_imports(known[name])
        if top not in sys.stdlib_module_names and top != "protocol"
    }
    bad |= {f"{n} -> {t}" for n in SHARED_LEAF for t in graph()[n] if t not in SHARED_LEAF}
    assert not bad, sorted(bad)


def test_the_harness_library_imports_the_stdlib_only() -> None:
    """The jev_harness library never imports kernel/, workers/, protocol/ (but its shared leaf)
    or a vendor SDK: a task script that imports it loads nothing of the agent (lxml for HTML is
    the one other)."""
    library = {n: p for n, p in _modules().items() if n.startswith("jev_harness")}
    library = {n: p for n, p in library.items() if not _is_front_end(n)}
    assert {"jev_harness", "jev_harness.task", "jev_harness.web.html"} <= set(library)
    edges = graph()
    bad = {
        f"{name} -> {top}"
        for name, path in library.items()
        for top in _top_level_imports(path)
        if top not in sys.stdlib_module_names
        and top != "jev_harness"
        and top not in HARNESS_LIBRARY_MAY_IMPORT.get(name, set())
        and not (top == "protocol" and not _protocol_beyond_leaf(edges[name]))
    }
    assert not bad, sorted(bad)


def _protocol_beyond_leaf(targets: set[str]) -> set[str]:
    return {t for t in targets if t.split(".")[0] == "protocol" and t not in SHARED_LEAF}


def test_the_harness_library_imports_none_of_its_front_ends() -> None:
    edges = graph()
    bad = {
        f"{n} -> {t}"
        for n, ts in edges.items()
        if n.startswith("jev_harness") and not _is_front_end(n)
        for t in ts
        if _is_front_end(t)
    }
    assert not bad, sorted(bad)
