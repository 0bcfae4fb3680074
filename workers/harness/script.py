"""The harness worker's side of a task script: loading it by hash, and what the kernel is told.

`load_script` executes the bytes whose sha256 the kernel logged; `tool_info` and `receipt_of`
describe the task's tools and receipt as messages; `provide_keys` hands CAMOFOX_ACCESS_KEY to
the task's Camofox providers, the only objects here that send it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import types
from typing import Any

from protocol.harness import ParameterSpec, Receipt, ToolInfo
from workers.base import RequestFailed

SCRIPT_MODULE = "jev_task_script"


def load_script(path: str, sha256: str) -> types.ModuleType:
    """Execute the script's bytes as a module, refusing bytes that do not hash to sha256."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang us
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RequestFailed("task", f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
    finally:
        os.close(fd)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise RequestFailed("task", f"{path} changed since it was logged (sha256 {digest})")
    module = types.ModuleType(SCRIPT_MODULE)
    module.__file__ = path
    sys.modules[SCRIPT_MODULE] = module  # dataclasses and pickling-free helpers look it up
    code = compile(data, path, "exec", dont_inherit=True)
    exec(code, module.__dict__)
    return module


def camofox_providers(task: Any) -> list[Any]:
    """The Camofox providers among the task's toolkits (none unless the script imported one)."""
    camofox = sys.modules.get("jev_harness.web.camofox")
    if camofox is None:
        return []
    found = [getattr(t, "provider", None) for t in getattr(task, "toolkits", ())]
    return [p for p in found if isinstance(p, camofox.CamofoxProvider)]


def provide_keys(task: Any, keys: dict[str, str]) -> int:
    """Hand CAMOFOX_ACCESS_KEY to the task's Camofox providers (nothing else gets it)."""
    providers = camofox_providers(task)
    for provider in providers:
        provider.use_access_key(keys.get("CAMOFOX_ACCESS_KEY"))
    return len(providers)


def tool_info(tool: Any) -> ToolInfo:
    return ToolInfo(
        name=tool.name,
        description=tool.description,
        effect=tool.effect,
        parameters=[
            ParameterSpec(
                name=p.name,
                description=p.description,
                selection=p.selection,
                depends_on=list(p.depends_on),
            )
            for p in tool.parameters
        ],
    )


def receipt_of(task: Any, raw: dict[str, Any] | None = None) -> Receipt | None:
    """The task's artifact receipt with the verifier's verdict; None for a task without one."""
    raw = raw or task.receipt()
    if not raw:
        return None
    return Receipt(
        path=str(raw.get("path", "")),
        exists=bool(raw.get("exists", False)),
        match=bool(raw.get("match", False)),
        record_count=int(raw.get("record_count", 0)),
        digest=None if raw.get("digest") is None else str(raw["digest"]),
        sources=[str(s) for s in raw.get("sources", [])],
        verdict=bool(task.complete()),
    )
