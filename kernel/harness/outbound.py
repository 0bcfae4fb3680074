"""The kernel's side of the harness boundary: known secrets never cross it, in either direction.

The harness worker runs the task script's code, so it is given no known secret (issue 20,
items 4 and 5): the goal, context and inputs it gets are redacted here, and everything it
returns (observations, option descriptions, outcomes, receipts, the report it is about to
write) is redacted here before anything in the kernel uses, logs, prints or sends it to Jev.
The one Redactor is the session's kind (kernel/store/redact.py), built from the same secrets.

Option ids are labels too (a file named after a key, a link with a token in its query): an id
that redaction would change is given a stable alias (its redacted text, `~2`, `~3` ... when
taken), and the alias is turned back into the worker's id on the way in. State refs are
fingerprints of the redacted observation, so no hash of a secret ever leaves either.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from kernel.store.redact import Redactor
from protocol.harness import Observed, Operated, OptionSpec, Receipt, ToolInfo


class Outbound:
    """Redaction of what the kernel sends the harness worker and of what it answers."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._issued: dict[tuple[str, str], dict[str, str]] = {}  # (tool, param) -> label -> id
        self._given: dict[tuple[str, str, str], str] = {}  # (tool, param, id) -> label

    # --- text and structures ------------------------------------------------------------

    def text(self, text: str) -> str:
        return self.redactor.text(text)

    def value(self, obj: Any) -> Any:
        """A deep copy with every string redacted, dict keys included (free-form data)."""
        return self.redactor.value(obj)

    def values(self, obj: Any) -> Any:
        """A deep copy with every string value redacted, keys kept (a document's structure)."""
        if isinstance(obj, str):
            return self.redactor.text(obj)
        if isinstance(obj, dict):
            return {k: self.values(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.values(v) for v in obj]
        return obj

    # --- option ids ---------------------------------------------------------------------

    def label(self, tool: str, parameter: str, ident: str) -> str:
        """The kernel's label for the worker's option id: the id itself unless redaction
        changes it (or another id already holds it); stable for the session."""
        key = (tool, parameter, ident)
        if key in self._given:
            return self._given[key]
        issued = self._issued.setdefault((tool, parameter), {})
        base = self.redactor.text(ident)
        candidate, n = base, 2
        while issued.get(candidate, ident) != ident:
            candidate, n = f"{base}~{n}", n + 1
        issued[candidate] = ident
        self._given[key] = candidate
        return candidate

    def ident(self, tool: str, parameter: str, label: str) -> str:
        """The worker's option id for a kernel label (an unknown label passes unchanged: the
        worker then refuses it as unoffered)."""
        return self._issued.get((tool, parameter), {}).get(label, label)

    def idents(self, tool: str, labels: dict[str, str]) -> dict[str, str]:
        return {name: self.ident(tool, name, label) for name, label in labels.items()}

    def labels(self, tool: str, idents: dict[str, str]) -> dict[str, str]:
        return {name: self.label(tool, name, ident) for name, ident in idents.items()}

    def options(self, tool: str, parameter: str, options: list[OptionSpec]) -> list[OptionSpec]:
        return [
            OptionSpec(id=self.label(tool, parameter, o.id), description=self.text(o.description))
            for o in options
        ]

    # --- replies ------------------------------------------------------------------------

    def tool(self, tool: ToolInfo) -> ToolInfo:
        params = [
            msgspec.structs.replace(p, description=self.text(p.description))
            for p in tool.parameters
        ]
        return msgspec.structs.replace(
            tool, description=self.text(tool.description), parameters=params
        )

    def receipt(self, receipt: Receipt | None) -> Receipt | None:
        if receipt is None:
            return None
        return msgspec.structs.replace(
            receipt, path=self.text(receipt.path), sources=[self.text(s) for s in receipt.sources]
        )

    def observed(self, observed: Observed) -> Observed:
        """Redacted, with a state_ref computed here from the redacted observation."""
        observation = self.value(observed.observation)
        canonical = json.dumps(
            observation, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str
        )
        return msgspec.structs.replace(
            observed,
            observation=observation,
            offered=[self.tool(t) for t in observed.offered],
            state_ref=hashlib.sha256(canonical.encode()).hexdigest(),
            receipt=self.receipt(observed.receipt),
        )

    def operated(self, reply: Operated) -> Operated:
        return msgspec.structs.replace(
            reply,
            summary=self.text(reply.summary),
            text=self.text(reply.text),
            error=self.text(reply.error),
            source=self.text(reply.source),
            target=self.text(reply.target),
            data=self.value(reply.data),
            receipt=self.receipt(reply.receipt),
            report=None,
        )
