"""How a harness run ends, as an exception the loop turns into its `final` record."""

from __future__ import annotations


class RunEnded(Exception):
    """The run reached a final status; `status` and `summary` say which."""

    def __init__(self, status: str, summary: str) -> None:
        super().__init__(summary)
        self.status, self.summary = status, summary
