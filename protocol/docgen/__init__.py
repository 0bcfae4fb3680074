"""The generated docs: `make docs` writes each from the code, a test fails when one is stale.

Tooling, not runtime: nothing imports this package but `make docs` and the tests.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol import json_schema
from protocol.docgen import events, messages, modules

generate = events.generate  # docs/EVENTS.md (the name tests and scripts have used)

# docs/NAME -> the function that writes it
DOCS: dict[str, Callable[[], str]] = {
    "EVENTS.md": events.generate,
    "MESSAGES.md": messages.generate,
    "INTERNALS.md": modules.generate,
    "jmp-json.schema.json": json_schema.text,  # what `jmp --json-schema` prints
}
