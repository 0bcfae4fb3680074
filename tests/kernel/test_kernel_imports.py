"""Every kernel module, imported in a fresh interpreter, loads only the stdlib and the named
infrastructure: never a vendor SDK (openhands, openai, typesafe_sdk, mcp, acp), and not the
infrastructure that is imported on first use (issue 11: the kernel's start is measured
against a bare interpreter's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Infrastructure the kernel may load, and why. Anything else (a vendor SDK) fails the test.
ALLOWED = {
    "msgspec": "log records and wire frames",
    "typing_extensions": "loaded by msgspec",
}
# Needed, but never at import: each costs about a bare interpreter's start.
LAZY = {
    "zmq": "the worker sockets: imported by a worker's I/O thread (kernel/supervision/wire.py)",
    "psutil": "process trees: imported when a tree is killed (proctree.py; recording reads /proc)",
}
OURS = {"kernel", "protocol", "host"}
CODE = """
import importlib, json, pkgutil, sys
import kernel
before = set(sys.modules)
names = sorted(m.name for m in pkgutil.walk_packages(kernel.__path__, "kernel."))
for name in names:
    importlib.import_module(name)
loaded = {m.split(".")[0] for m in set(sys.modules) - before}
print(json.dumps({"modules": names, "loaded": sorted(loaded - set(sys.stdlib_module_names))}))
"""


def test_every_kernel_module_loads_only_allowed_infrastructure() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    on_disk = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "kernel").rglob("*.py")
        if p.name != "__init__.py"
    }
    assert on_disk <= set(found["modules"])  # every module was imported
    extra = {
        m for m in found["loaded"] if m not in ALLOWED and m not in OURS and not m.startswith("_")
    }
    assert not extra, f"kernel modules load {sorted(extra)}; allowed: {sorted(ALLOWED)}"
    eager = sorted(set(found["loaded"]) & set(LAZY))
    assert not eager, f"kernel modules import {eager} at import time; see LAZY for where instead"
    for vendor in ("openhands", "openai", "typesafe_sdk", "mcp", "acp", "litellm"):
        assert vendor not in found["loaded"]


# What a CLI run imports on its path to the first Jev request (cli/run.py, kernel/loop/agent.py)
# and the stdlib it must leave for later (issue 33): each is imported where first used.
FIRST_REQUEST = (
    "cli.printer",
    "cli.run",
    "kernel.config.settings",
    "kernel.supervision.models",
    "kernel.loop.opening",
    "kernel.loop.agent",
    "kernel.config.mcp",
    "kernel.supervision.tools",
    "kernel.store.session",
    "kernel.store.commit",
)
LATER = {
    "sqlite3": "the recall index: opened when a session has pages to recall (context_view.py)",
    "concurrent": "parallel fsyncs of a round that holds files (kernel/store/commit.py)",
    "logging": "loaded by concurrent.futures; a warning's own import elsewhere",
}


def test_the_path_to_the_first_request_imports_nothing_it_does_not_need() -> None:
    code = f"import sys\nimport {', '.join(FIRST_REQUEST)}\nprint(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    loaded = {name.split(".")[0] for name in json.loads(out.stdout.replace("'", '"'))}
    assert "msgspec" in loaded  # the probe works
    early = sorted(loaded & set(LATER))
    assert not early, f"imported before the first request: {early}; see LATER for where instead"
