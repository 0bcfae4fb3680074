"""jev-harness: thin task scripts over reusable toolkits (`import jev_harness as jev`).

Importing this package is cheap: the task model and evidence store load on first use of a
name, web providers and the session API only when asked for (a missing optional module raises
AttributeError naming it, never breaks `import jev_harness`).
"""

from __future__ import annotations

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
    "open_session": "jev_harness.session",
}

__all__ = [
    "CamofoxProvider",
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
