"""jev-harness: thin task scripts over reusable toolkits (`import jev_harness as jev`).

Importing this package is cheap: the task model and evidence store load on first use of a
name, web providers and the session API only when asked for (a missing optional module raises
AttributeError naming it, never breaks `import jev_harness`).
"""

import sys as _sys

# `python -m` put the launch directory first on sys.path before any code of ours ran: when the
# module run is ours, our code's root takes its place (what a run from the checkout meant)
# before the first import that could find a file there. (This block opens every package a
# person runs with `python -m`; tests/test_launch_dir.py.)
if _sys.argv[:1] == ["-m"] and not _sys.flags.safe_path:  # the -m target is being located
    _argv = _sys.orig_argv
    _pairs = zip(_argv, [*_argv[1:], ""], strict=True)
    _target = next((a[2:] or b for a, b in _pairs if a[:2] == "-m"), "")
    if _target.partition(".")[0] == __name__:
        _sys.path[0] = __file__.rpartition("/")[0].rpartition("/")[0]
    del _argv, _pairs, _target

import importlib
from typing import TYPE_CHECKING, Any

# name -> module that defines it
_EXPORTS = {
    "Option": "jev_harness.model",
    "Parameter": "jev_harness.model",
    "Tool": "jev_harness.model",
    "Toolkit": "jev_harness.model",
    "Task": "jev_harness.task",
    "TaskScript": "jev_harness.model",
    "Outcome": "jev_harness.model",
    "OfferError": "jev_harness.model",
    "EvidenceStore": "jev_harness.evidence_store",
    "Passage": "jev_harness.evidence_store",
    "EvidenceTask": "jev_harness.evidence_task",
    "contains": "jev_harness.checks",
    "markers_verifier": "jev_harness.checks",
    "markers_by_label": "jev_harness.checks",
    "WorkspaceToolkit": "jev_harness.workspace",
    "WebTools": "jev_harness.web",
    "HttpProvider": "jev_harness.web",
    "CamofoxProvider": "jev_harness.web",
    "ChromiumProvider": "jev_harness.web",
    "open_session": "jev_harness.session",
}

__all__ = [
    "CamofoxProvider",
    "ChromiumProvider",
    "EvidenceStore",
    "EvidenceTask",
    "HttpProvider",
    "OfferError",
    "Option",
    "Outcome",
    "Parameter",
    "Passage",
    "Task",
    "TaskScript",
    "Tool",
    "Toolkit",
    "WebTools",
    "WorkspaceToolkit",
    "contains",
    "markers_by_label",
    "markers_verifier",
    "open_session",
]

if TYPE_CHECKING:
    from jev_harness.checks import contains, markers_by_label, markers_verifier
    from jev_harness.evidence_store import EvidenceStore, Passage
    from jev_harness.evidence_task import EvidenceTask
    from jev_harness.model import (
        OfferError,
        Option,
        Outcome,
        Parameter,
        TaskScript,
        Tool,
        Toolkit,
    )
    from jev_harness.task import Task
    from jev_harness.workspace import WorkspaceToolkit


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'jev_harness' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            raise  # a dependency of an existing module is missing: say so, do not hide it
        raise AttributeError(f"jev_harness.{name} needs {module_name}, not installed") from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
